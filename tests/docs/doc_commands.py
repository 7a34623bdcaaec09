"""The shell commands of the docs, read as a shell reads them.

A command is every line of a fenced ``sh``, ``bash`` or ``shell`` block (``console``: every line
after a ``$ `` prompt) that is not blank and not a ``#`` comment, together with its continuation
lines: a trailing ``\\``, a quote still open at the end of the line, or a trailing ``|``, ``&&``
or ``||``. The ``#`` lines after a command, up to the next one, are its notes: the output the doc
shows, or a remark. A ``#`` that starts a word outside quotes starts the line's comment.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

SHELL_TAGS = ("sh", "bash", "shell", "console")
FENCE = re.compile(r"^ *```(\S*)\s*$")


@dataclass(frozen=True)
class Command:
    doc: str  # the doc's path from the repository root, e.g. "docs/api.md"
    line: int  # where the command starts in the doc, 1-based
    text: str  # what the shell is given: the command's lines as the doc writes them
    key: str  # one line: continuations joined, comments dropped, runs of blanks as one space
    comment: str  # the trailing comment of the command's last line, "" if none
    notes: tuple[str, ...]  # the note lines after it, without their leading "# " / "#"


def shell_blocks(markdown: str) -> list[tuple[int, str, list[str]]]:
    """(first line number, tag, lines) of every fenced shell block."""
    blocks: list[tuple[int, str, list[str]]] = []
    lines = markdown.splitlines()
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        tag = opening.group(1)
        end = index + 1
        while end < len(lines) and not FENCE.match(lines[end]):
            end += 1
        if tag in SHELL_TAGS:
            blocks.append((index + 2, tag, lines[index + 1 : end]))
        index = end + 1
    return blocks


@dataclass
class _Scan:
    """The quoting state a shell carries from one line of a command to the next."""

    single: bool = False
    double: bool = False

    def line(self, line: str) -> tuple[str, str, bool]:
        """(code, comment, escaped end of line) of one physical line."""
        index = 0
        while index < len(line):
            char = line[index]
            if self.single:
                self.single = char != "'"
            elif self.double:
                if char == "\\":
                    index += 1
                elif char == '"':
                    self.double = False
            elif char == "\\":
                if index == len(line) - 1:
                    return line[:index], "", True
                index += 1
            elif char == "'":
                self.single = True
            elif char == '"':
                self.double = True
            elif char == "#" and (index == 0 or line[index - 1].isspace()):
                return line[:index], line[index + 1 :].strip(), False
            index += 1
        return line, "", False

    @property
    def quoted(self) -> bool:
        return self.single or self.double


def _continues(code: str, escaped: bool, scan: _Scan) -> bool:
    tail = code.rstrip()
    return escaped or scan.quoted or tail.endswith(("|", "&&", "||"))


def split_commands(doc: str, first_line: int, tag: str, lines: list[str]) -> list[Command]:
    commands: list[Command] = []
    notes: list[str] = []
    index = 0

    def flush_notes() -> None:
        if commands and notes:
            last = commands[-1]
            commands[-1] = Command(
                last.doc, last.line, last.text, last.key, last.comment, (*last.notes, *notes)
            )
        notes.clear()

    while index < len(lines):
        raw = lines[index]
        stripped = raw.strip()
        if tag == "console":
            if not stripped.startswith("$ "):
                if stripped:
                    notes.append(stripped)
                index += 1
                continue
            raw = stripped[2:]
            stripped = raw.strip()
        if not stripped:
            index += 1
            continue
        if stripped.startswith("#"):
            notes.append(re.sub(r"^# ?", "", stripped))
            index += 1
            continue
        flush_notes()
        start = index
        scan = _Scan()
        parts: list[str] = []
        physical: list[str] = []
        comment = ""
        while True:
            physical.append(raw)
            code, comment, escaped = scan.line(raw)
            parts.append(code)
            index += 1
            if not _continues(code, escaped, scan) or index >= len(lines):
                break
            raw = lines[index]
        key = " ".join(" ".join(parts).split())
        commands.append(Command(doc, first_line + start, "\n".join(physical), key, comment, ()))
    flush_notes()
    return commands


def doc_commands(repo: Path, doc: Path) -> list[Command]:
    name = doc.relative_to(repo).as_posix()
    return [
        command
        for first_line, tag, lines in shell_blocks(doc.read_text())
        for command in split_commands(name, first_line, tag, lines)
    ]


def doc_files(markdown: str) -> dict[str, str]:
    """The files a doc asks the reader to write: ```python blocks opening ``# NAME.py`` and
    ```toml blocks opening ``# NAME.toml`` (a config file)."""
    files: dict[str, str] = {}
    for lang, block in re.findall(r"```(python|toml)\n(.*?)```", markdown, re.S):
        suffix = "py" if lang == "python" else "toml"
        named = re.match(rf"# ([\w-]+\.{suffix})\b", block)
        if named:
            # The first block of a name is the file; a later one shows it changed (a mistake).
            files.setdefault(named.group(1), block)
    return files
