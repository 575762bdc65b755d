"""Does a Python file change do more than edit comments and docstrings?"""

import ast
import io
import tokenize


def _without_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                empty = [] if isinstance(node, ast.Module) else [ast.Pass()]
                node.body = body[1:] or empty
    return tree


def _ast_shape(source: bytes) -> str:
    return ast.dump(_without_docstrings(ast.parse(source)))


def _tokens_without_comments(source: bytes) -> list[tuple[int, str]]:
    ignored = {tokenize.COMMENT, tokenize.NL, tokenize.ENCODING}
    tokens = tokenize.tokenize(io.BytesIO(source).readline)
    return [(tok.type, tok.string) for tok in tokens if tok.type not in ignored]


def is_semantic_python_change(old: bytes, new: bytes) -> bool:
    """True if the code differs once comments, blank lines and docstrings are ignored.

    Code this Python cannot parse (for example Python 2) is compared token by
    token without comments; if even that fails, the change counts as semantic.
    """
    try:
        return _ast_shape(old) != _ast_shape(new)
    except (SyntaxError, ValueError):
        pass
    try:
        return _tokens_without_comments(old) != _tokens_without_comments(new)
    except (tokenize.TokenError, SyntaxError, ValueError):
        return True
