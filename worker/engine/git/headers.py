"""The paths in the headers of git's diffs, quoted C-style where they hold a quote, a backslash
or a control character (and, unless core.quotePath is off, bytes beyond ASCII)."""


def path_unquoted(raw: bytes) -> bytes:
    """Undo git's C-style quoting of a path ("a\\tb" or octal escapes)."""
    if not (raw.startswith(b'"') and raw.endswith(b'"')):
        return raw
    out, i, body = bytearray(), 0, raw[1:-1]
    escapes = {ord("n"): 10, ord("t"): 9, ord('"'): 34, ord("\\"): 92, ord("a"): 7,
               ord("b"): 8, ord("f"): 12, ord("r"): 13, ord("v"): 11}
    while i < len(body):
        c = body[i]
        if c == 92 and i + 1 < len(body):
            nxt = body[i + 1]
            if 48 <= nxt <= 55:
                out.append(int(body[i + 1:i + 4], 8))
                i += 4
                continue
            out.append(escapes.get(nxt, nxt))
            i += 2
            continue
        out.append(c)
        i += 1
    return bytes(out)


def _quoted_end(text: bytes) -> int:
    """Where the C-quoted string that `text` starts with ends (after its closing quote)."""
    i = 1
    while i < len(text):
        if text[i] == 92:  # a backslash escapes the next character
            i += 2
        elif text[i] == 34:
            return i + 1
        else:
            i += 1
    return len(text)


def diff_git_paths(line: bytes) -> tuple[bytes, bytes]:
    """Paths from `diff --git a/X b/Y`; exact when X == Y, else fixed later by other headers."""
    rest = line[len(b"diff --git "):].rstrip(b"\n")
    if rest.startswith(b'"'):
        end = _quoted_end(rest)
        old, new = path_unquoted(rest[:end]), path_unquoted(rest[end + 1:])
        return old[2:], new[2:]
    half = (len(rest) - 5) // 2
    if len(rest) % 2 == 1 and rest[2 + half:5 + half] == b" b/":
        return rest[2:2 + half], rest[5 + half:]
    old, _, new = rest.partition(b" b/")
    return old[2:], new
