"""A release's licence files: found by name at the top of a tree, their SPDX identifier recognised
from the text where it is a common licence, and never guessed where it is not."""

from pathlib import Path

import pytest

from worker.engine.release.licences import licence_files, licence_spdx

DEBIAN_TEXTS = Path("/usr/share/common-licenses")  # every Debian system's full licence texts (base-files)

MIT = """MIT License\n\nCopyright (c) 2020 Someone\n\nPermission is hereby granted, free of charge, to any person
obtaining a copy of this software..."""
APACHE = """                                 Apache License
                           Version 2.0, January 2004
                        http://www.apache.org/licenses/"""
BSD3 = """Copyright (c) 2010 Pallets\n\nRedistribution and use in source and binary forms, with or without
modification, are permitted provided that the following conditions are met: ... 3. Neither the name of the
copyright holder nor the names of its contributors may be used to endorse or promote products"""
BSD2 = BSD3.split("3. Neither")[0]
GPL3 = "GNU GENERAL PUBLIC LICENSE\n   Version 3, 29 June 2007"
GPL2 = "GNU GENERAL PUBLIC LICENSE\n   Version 2, June 1991"
LGPL21 = "GNU LESSER GENERAL PUBLIC LICENSE\n Version 2.1, February 1999"
MPL = "Mozilla Public License Version 2.0\n=================================="
ISC = "ISC License\n\nPermission to use, copy, modify, and/or distribute this software for any purpose with or\nwithout fee"
UNLICENSE = "This is free and unencumbered software released into the public domain."


def test_common_licences_are_recognised_whatever_the_line_breaks():
    assert [licence_spdx(text) for text in (MIT, APACHE, BSD3, BSD2, GPL3, GPL2, LGPL21, MPL, ISC, UNLICENSE)] == [
        "MIT", "Apache-2.0", "BSD-3-Clause", "BSD-2-Clause", "GPL-3.0", "GPL-2.0", "LGPL-2.1", "MPL-2.0", "ISC",
        "Unlicense"]


@pytest.mark.parametrize("name, spdx", [("Apache-2.0", "Apache-2.0"), ("BSD", "BSD-3-Clause"), ("GPL-2", "GPL-2.0"),
                                        ("GPL-3", "GPL-3.0"), ("LGPL-2", "LGPL-2.0"), ("LGPL-2.1", "LGPL-2.1"),
                                        ("LGPL-3", "LGPL-3.0"), ("MPL-2.0", "MPL-2.0"), ("MPL-1.1", None),
                                        ("Artistic", None)])
def test_whole_licence_texts_are_named_by_their_own_title_not_by_the_licences_they_mention(name, spdx):
    # The full GPLv3 speaks of the Affero and Lesser licences; the LGPL's of the GPL: the title decides.
    assert licence_spdx((DEBIAN_TEXTS / name).read_text()) == spdx


def test_a_text_that_is_no_common_licence_is_not_guessed():
    assert licence_spdx("All rights reserved. Do not copy.") is None
    assert licence_spdx("GNU GENERAL PUBLIC LICENSE (some version)") is None
    assert licence_spdx("") is None


def test_licence_files_are_found_by_name_at_the_top_of_the_tree():
    names = ["README.md", "LICENSE", "licence.txt", "COPYING", "LICENSE-APACHE", "license_check.py", "license.py", "LICENSE.md", "setup.py",
             "LICENSES", "UNLICENSE"]
    assert licence_files(names) == ["COPYING", "LICENSE", "LICENSE-APACHE", "LICENSE.md", "UNLICENSE", "licence.txt"]
