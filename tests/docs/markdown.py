"""The Markdown side of the docs-as-tests convention (docs/testing.md, "Docs are tests").

Every fenced code block in README.md and docs/*.md carries a directive, an HTML comment on the line(s) before it
that a reader of the rendered page does not see:

    <!-- doc-test: KIND [words] [key=value ...] -->

Kinds of code blocks: ``file NAME`` (saved as NAME for the doc's runs; blocks with one NAME are joined in order),
``run`` (executed; options ``cwd=repo``, ``fails``, ``slow``, ``timeout=SECONDS``), ``output`` (must appear in the
preceding run's output), ``syntax REASON`` (cannot run here: only checked) and ``text`` (not code). The ``fields
MODULE:NAME [complete]`` and ``figures WORD=MODULE:NAME ...`` kinds point at the paragraph or table after them, and
``horovod-settings`` at a table.
"""

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

from tests.support import ROOT

BLOCK_KINDS = {"file", "run", "output", "syntax", "text"}
PROSE_KINDS = {"fields", "figures", "horovod-settings"}
RUN_OPTIONS = {"cwd", "fails", "slow", "timeout"}

_DIRECTIVE = re.compile(r"^\s*<!--\s*doc-test:\s*(.*?)\s*-->\s*$")
_FENCE = re.compile(r"^(\s*)(```+)\s*([\w+-]*)\s*$")
_SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")


@dataclass
class Directive:
    kind: str
    words: List[str]  # positional words after the kind (a file name, a reason, a dataclass)
    options: Dict[str, str]  # key=value words; a bare option word (e.g. ``fails``) maps to ""
    line: int

    @classmethod
    def parse(cls, body: str, line: int) -> "Directive":
        kind, _, rest_text = body.partition(" ")
        if kind in ("syntax", "text"):  # the rest is a free-text reason
            return cls(kind, rest_text.split(), {}, line)
        rest = shlex.split(rest_text)
        words, options = [], {}
        for word in rest:
            key, eq, value = word.partition("=")
            if eq:
                options[key] = value
            elif kind == "run" or word == "complete":
                options[word] = ""
            else:
                words.append(word)
        return cls(kind, words, options, line)


@dataclass
class Block:
    """A fenced code block and the directive before it."""

    doc: Path
    line: int  # 1-based line of the opening fence
    lang: str
    text: str
    directive: Optional[Directive]

    @property
    def where(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"


@dataclass
class Prose:
    """The paragraph or table right after a prose directive (``fields``, ``figures``, ``horovod-settings``)."""

    doc: Path
    line: int
    text: str
    directive: Directive

    @property
    def where(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"

    @property
    def spans(self) -> List[str]:
        return _SPAN.findall(self.text)


@dataclass
class Span:
    """An inline code span outside code blocks."""

    doc: Path
    line: int
    text: str

    @property
    def where(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"


@dataclass
class Doc:
    path: Path
    blocks: List[Block] = field(default_factory=list)
    prose: List[Prose] = field(default_factory=list)
    spans: List[Span] = field(default_factory=list)
    stray: List[Directive] = field(default_factory=list)  # directives followed by nothing they can apply to

    @property
    def name(self) -> str:
        return str(self.path.relative_to(ROOT))

    def files(self) -> Dict[str, str]:
        """The ``file`` blocks, joined per name in document order."""
        files: Dict[str, str] = {}
        for block in self.blocks:
            if block.directive and block.directive.kind == "file":
                name = block.directive.words[0]
                files[name] = files[name] + "\n" + block.text if name in files else block.text
        return files

    def output_of(self, run: Block) -> Optional[Block]:
        """The ``output`` block that belongs to ``run``: the next block, when it is one."""
        index = self.blocks.index(run)
        following = self.blocks[index + 1] if index + 1 < len(self.blocks) else None
        if following is not None and following.directive and following.directive.kind == "output":
            return following
        return None


def doc_paths() -> List[Path]:
    """The documentation the convention covers: README.md and every docs/*.md."""
    return [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))


def parse(path: Path) -> Doc:
    lines = path.read_text().splitlines()
    doc = Doc(path)
    pending: Optional[Directive] = None
    i = 0
    while i < len(lines):
        line = lines[i]
        directive = _DIRECTIVE.match(line)
        fence = _FENCE.match(line)
        if directive:
            if pending is not None:
                doc.stray.append(pending)
            pending = Directive.parse(directive.group(1), i + 1)
            i += 1
        elif fence:
            indent, ticks, lang = fence.groups()
            end = i + 1
            while end < len(lines) and not lines[end].strip().startswith(ticks):
                end += 1
            body = [text[len(indent):] if text.startswith(indent) else text.lstrip() for text in lines[i + 1:end]]
            doc.blocks.append(Block(path, i + 1, lang, "\n".join(body) + "\n", pending))
            pending = None
            i = end + 1
        elif not line.strip():
            i += 1
        else:
            start = i
            while i < len(lines) and lines[i].strip() and not _FENCE.match(lines[i]) and not _DIRECTIVE.match(lines[i]):
                doc.spans += [Span(path, i + 1, text) for text in _SPAN.findall(lines[i])]
                i += 1
            if pending is not None:
                if pending.kind in PROSE_KINDS:
                    doc.prose.append(Prose(path, start + 1, "\n".join(lines[start:i]), pending))
                else:
                    doc.stray.append(pending)
                pending = None
    if pending is not None:
        doc.stray.append(pending)
    return doc


def docs() -> List[Doc]:
    return [parse(path) for path in doc_paths()]
