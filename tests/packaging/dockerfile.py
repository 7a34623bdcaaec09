"""The Dockerfile and .dockerignore read the way Docker reads them, for the forms they use.

No docker daemon runs where the suite does, so the packaging test runs what the Dockerfile
runs instead. Whatever this reader does not understand fails loudly rather than being guessed
at: a Dockerfile that outgrows it needs the reader taught, not the test loosened.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Instruction:
    keyword: str  # upper case: FROM, RUN, ENV, …
    rest: str  # everything after the keyword, continuation lines joined


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]

    def last(self, keyword: str) -> Instruction:
        found = self.all(keyword)
        assert found, f"the stage FROM {self.base} has no {keyword}"
        return found[-1]

    def env(self) -> dict[str, str]:
        """ENV key=value pairs; values with $ substitution are not supported here."""
        values: dict[str, str] = {}
        for inst in self.all("ENV"):
            assert "$" not in inst.rest, f"ENV with substitution is not understood: {inst.rest}"
            for token in shlex.split(inst.rest):
                key, eq, value = token.partition("=")
                assert eq, f"only the ENV key=value form is understood: {inst.rest}"
                values[key] = value
        return values

    def command(self) -> list[str]:
        """What the container runs: ENTRYPOINT then CMD, both in exec (JSON) form."""
        entrypoint = self.all("ENTRYPOINT")
        cmd = self.all("CMD")
        return (exec_form(entrypoint[-1].rest) if entrypoint else []) + (
            exec_form(cmd[-1].rest) if cmd else []
        )

    def healthcheck(self) -> tuple[dict[str, str], list[str]]:
        """The HEALTHCHECK options (--timeout=5s → {"timeout": "5s"}) and its command."""
        rest = self.last("HEALTHCHECK").rest
        options: dict[str, str] = {}
        while rest.startswith("--"):
            option, _, rest = rest.partition(" ")
            name, _, value = option[2:].partition("=")
            options[name] = value
            rest = rest.lstrip()
        keyword, _, command = rest.partition(" ")
        assert keyword == "CMD", f"HEALTHCHECK {keyword} is not understood"
        return options, exec_form(command)

    def workdir(self) -> str:
        return self.last("WORKDIR").rest

    def runs(self) -> list[str]:
        """RUN commands (shell form) without their --mount/--network options."""
        commands = []
        for inst in self.all("RUN"):
            rest = inst.rest
            while rest.startswith("--"):
                rest = rest.partition(" ")[2].lstrip()
            commands.append(rest)
        return commands

    def copies(self) -> list[tuple[list[str], str]]:
        """COPY sources (context paths) and destination; COPY --from is not a context copy."""
        found = []
        for inst in self.all("COPY"):
            args = shlex.split(inst.rest)
            assert not any(a.startswith("--") for a in args), f"COPY options: {inst.rest}"
            found.append((args[:-1], args[-1]))
        return found


def parse(text: str) -> list[Stage]:
    stages: list[Stage] = []
    for inst in instructions(text):
        if inst.keyword == "FROM":
            base, _, name = inst.rest.partition(" AS ")
            stages.append(Stage(base.strip(), name.strip() or None))
        else:
            assert stages, f"{inst.keyword} before FROM"
            stages[-1].instructions.append(inst)
    return stages


def instructions(text: str) -> list[Instruction]:
    found: list[Instruction] = []
    pending = ""
    for line in text.splitlines():
        if line.strip().startswith("#"):
            continue  # comments, parser directives, and comment lines inside a continuation
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        logical = (pending + line).strip()
        pending = ""
        if logical:
            keyword, _, rest = logical.partition(" ")
            found.append(Instruction(keyword.upper(), rest.strip()))
    assert not pending.strip(), "the Dockerfile ends inside a continuation"
    return found


def exec_form(rest: str) -> list[str]:
    """An exec-form command: a JSON array of strings (a shell-form one is refused)."""
    value = json.loads(rest)
    assert isinstance(value, list) and all(isinstance(v, str) for v in value), rest
    return value


class DockerIgnore:
    """.dockerignore patterns: the last one that matches a path, or any folder above it, wins;
    ``!`` takes a path back in; ``*`` stays within a folder, ``**`` crosses folders."""

    def __init__(self, text: str) -> None:
        self.patterns: list[tuple[bool, re.Pattern[str]]] = []
        for raw in text.splitlines():
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            keep = line.startswith("!")
            pattern = os.path.normpath(line.removeprefix("!").strip()).lstrip("/")
            self.patterns.append((keep, re.compile(_pattern_regex(pattern))))

    def excluded(self, path: str) -> bool:
        parts = path.split("/")
        candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        excluded = False
        for keep, regex in self.patterns:
            if any(regex.fullmatch(c) for c in candidates):
                excluded = not keep
        return excluded


def _pattern_regex(pattern: str) -> str:
    out = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return "".join(out)


def copy_context(repo: Path, root: Path, stage: Stage, ignore: DockerIgnore) -> Path:
    """The stage's context COPYs made under ``root`` (as the image's /), the way Docker makes
    them: a folder's contents go to the destination, symlinks stay symlinks, and what the
    .dockerignore leaves out is not there. Returns the stage's WORKDIR under ``root``."""
    workdir = root / stage.workdir().lstrip("/")
    workdir.mkdir(parents=True, exist_ok=True)
    for sources, dest in stage.copies():
        target = workdir / dest if not dest.startswith("/") else root / dest.lstrip("/")
        into_folder = dest.endswith("/") or len(sources) > 1
        for source in sources:
            assert not ignore.excluded(source), f"COPY {source}: the .dockerignore leaves it out"
            path = repo / source
            if path.is_dir() and not path.is_symlink():
                _copy_tree(repo, path, target, ignore)
            else:
                destination = target / path.name if into_folder else target
                destination.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, destination)
    return workdir


def _copy_tree(repo: Path, folder: Path, target: Path, ignore: DockerIgnore) -> None:
    target.mkdir(parents=True, exist_ok=True)
    for entry in sorted(folder.iterdir()):
        if ignore.excluded(entry.relative_to(repo).as_posix()):
            continue
        if entry.is_symlink():
            (target / entry.name).symlink_to(os.readlink(entry))
        elif entry.is_dir():
            _copy_tree(repo, entry, target / entry.name, ignore)
        else:
            shutil.copy2(entry, target / entry.name)
