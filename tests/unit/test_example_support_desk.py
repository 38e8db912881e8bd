"""The support_desk example (FastMCP style): collected only while functions/tools/support_desk.py exists."""

from __future__ import annotations

from tests.support import REPO
from tests.unit.test_fastmcp_facade import assert_fastmcp_parity


def test_the_support_desk_example_publishes_what_fastmcp_4_1_4_publishes_modulo_titles() -> None:
    assert_fastmcp_parity(REPO / "functions" / "tools" / "support_desk.py")
