"""docs/config.md and the Settings type agree: the key list is generated from the type and its
field comments, and the doc's and the README's config files pass ``loopgate config check``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from loopgate.gateway.agents.spec import AgentSpec
from loopgate.gateway.settings import Settings
from loopgate.gateway.settings_doc import DOC, generate, with_generated
from tests.gateway.cli_support import loopgate
from tests.gateway.harness import REPO


def test_the_doc_lists_what_the_type_has() -> None:
    doc = DOC.read_text()
    assert with_generated(doc, generate()) == doc, (
        "docs/config.md is out of date: python -m loopgate.gateway.settings_doc --write"
    )
    listed = re.findall(r"^\| `(\w+)` \|", doc, re.M)
    assert listed == [*Settings.__struct_fields__, *AgentSpec.__struct_fields__]


def test_a_field_without_a_comment_fails_the_generator() -> None:
    source = Path(REPO / "gateway" / "settings.py").read_text()
    bare = source.replace("    port: int = 8000  # port to listen on\n", "    port: int = 8000\n")
    assert bare != source
    with pytest.raises(ValueError, match="no comment to document them: port"):
        generate(bare)


@pytest.mark.parametrize("doc", ["README.md", "docs/config.md"])
def test_the_config_files_shown_pass_config_check(doc: str, tmp_path: Path) -> None:
    blocks = re.findall(r"```toml\n(.*?)```", (REPO / doc).read_text(), re.S)
    assert blocks, f"{doc} shows no config file"
    for block in blocks:
        (tmp_path / "loopgate.toml").write_text(block)
        done = loopgate(tmp_path, "config", "check", "loopgate.toml")
        assert (done.returncode, done.stdout) == (0, "loopgate.toml: ok\n"), done.stderr
