"""Launch scripts read as the shell would read them, without running anything.

verl, TRL and OpenRLHF runs are started by shell scripts: variables set at
the top (``gen_tp=4``, ``train_files="['$a', '$b']"``, ``NNODES=${NNODES:-8}``,
``max_len=$((1024 * 2))``), then one long command with ``\\`` line
continuations and ``$@``. :func:`split_script` turns such a script into its
commands (lists of words) with quoting and expansion done as bash does:

- single quotes are literal; double quotes expand ``$VAR``; a backslash
  escapes; ``\\`` + newline continues the line; ``#`` starts a comment;
- ``$VAR`` / ``${VAR}`` / ``${VAR:-default}`` take the script's own
  assignments first, then the environment (each variable taken from the
  environment is named in a warning, e.g. ``$HOME``); an unset variable is
  left as written and named in a warning;
- arrays: ``A=( x y )`` and ``A+=( z )``; ``"${A[@]}"`` is one word per element;
- ``$((...))`` is integer arithmetic; ``$@`` / ``$1``... (the script's own
  arguments) are empty, with a warning; ``$(...)`` and backquotes are not run:
  left as written, with a warning;
- ``;``, ``&&``, ``||``, ``|``, ``&`` and newlines end a command;
  redirections (``> log``, ``2>&1``) are dropped.
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Mapping

import attrs

from hfsdk import ConfigError

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_OPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Div: operator.floordiv,  # shell arithmetic is integer arithmetic
    ast.Mod: operator.mod,
}


class UnclosedQuoteError(ConfigError):
    """A script with a quote that is never closed (``str()`` says where)."""


@attrs.define
class Script:
    """The commands of a script (each a list of words) and what reading it noticed."""

    commands: list[list[str]] = attrs.field(factory=list)
    variables: dict[str, str] = attrs.field(factory=dict)
    arrays: dict[str, list[str]] = attrs.field(factory=dict)
    """Bash arrays (``ARGS=( a=1 b=2 )``, ``ARGS+=( ... )``), expanded by ``"${ARGS[@]}"``."""
    warnings: list[str] = attrs.field(factory=list)
    unset: set[str] = attrs.field(factory=set)
    """Variables that were neither assigned nor in the environment (left as written)."""

    def warn(self, text: str) -> None:
        """Record ``text`` once."""
        if text not in self.warnings:
            self.warnings.append(text)


def _arith(expr: str, lookup: Mapping[str, str]) -> int:
    def value(node: ast.AST) -> int:
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name):
            return int(lookup.get(node.id, "0") or 0)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](value(node.left), value(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -value(node.operand)
        raise ValueError(expr)

    bare = re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", r"\1", expr)  # $a and ${a} read as a
    return value(ast.parse(bare.replace("$", "").strip(), mode="eval").body)


def _brace_end(text: str, start: int, pair: str = "{}") -> int:
    """Index of the closing ``pair[1]`` matching the ``pair[0]`` at ``start`` (quotes and
    nesting respected); the last index when it is never closed."""
    depth, i, quote = 0, start, None
    while i < len(text):
        char = text[i]
        if quote:
            if char == quote:
                quote = None
        elif char in "'\"":
            quote = char
        elif char == pair[0]:
            depth += 1
        elif char == pair[1]:
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return len(text) - 1


_SPLIT = "\x00"
"""Between the elements of an expanded array inside one word: they become separate words."""
_ARRAY_ASSIGNMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(\+?)=")


class _Reader:
    def __init__(self, text: str, env: Mapping[str, str], script: Script) -> None:
        self.text, self.env, self.script = text, env, script
        self.i = 0
        self.collected: list[str] | None = None  # an array's elements: words, no commands

    def _array(self, name: str, append: bool) -> None:
        """Read the ``( ... )`` at ``self.i`` as the elements of array ``name``."""
        text = self.text
        j = _brace_end(text, self.i, "()")
        if text[j] != ")":
            self._unclosed("(", self.i)
        inner = _Reader(text[self.i + 1 : j], self.env, self.script)
        inner.collected = []
        inner.commands()
        before = self.script.arrays.get(name, []) if append else []
        self.script.arrays[name] = before + inner.collected
        self.i = j + 1

    # -- expansion ------------------------------------------------------------------------

    def _lookup(self, name: str) -> str | None:
        if name in self.script.variables:
            return self.script.variables[name]
        if name in self.env:
            self.script.warn(f"${name} taken from this environment: {self.env[name]!r}")
            return self.env[name]
        return None

    def _dollar(self) -> str:
        """Expand the ``$...`` at ``self.i`` (which points at ``$``); returns the text."""
        text, i = self.text, self.i
        nxt = text[i + 1 : i + 2]
        if text.startswith("$((", i):
            end = text.find("))", i)
            expr = text[i + 3 : end]
            self.i = end + 2
            lookup = {**dict(self.env), **self.script.variables}
            try:
                return str(_arith(expr, lookup))
            except (ValueError, SyntaxError, ZeroDivisionError):
                self.script.warn(f"$(({expr})) is not integer arithmetic hfsdk reads; left as is")
                return f"$(({expr}))"
        if nxt == "(":
            depth, j = 0, i + 1
            while j < len(text):
                depth += {"(": 1, ")": -1}.get(text[j], 0)
                if depth == 0:
                    break
                j += 1
            self.i = j + 1
            raw = text[i : j + 1]
            self.script.warn(f"{raw} is a command substitution; not run, left as written")
            return raw
        if nxt == "{":
            end = _brace_end(text, i + 1)
            body = text[i + 2 : end]
            self.i = end + 1
            element = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)\[([@*]|\d+)\]$", body)
            if element is not None:
                name = element.group(1)
                if name in self.script.arrays:
                    items = self.script.arrays[name]
                else:  # a plain variable is an array of one; an unset one of none
                    scalar = self._lookup(name)
                    if scalar is None:
                        self.script.warn(f"${{{body}}} is not set here; taken as empty")
                    items = [] if scalar is None else [scalar]
                if element.group(2) in "@*":
                    return _SPLIT + _SPLIT.join(items) + _SPLIT  # separate words, even quoted
                index = int(element.group(2))
                return items[index] if index < len(items) else ""
            match = re.match(r"^([A-Za-z_][A-Za-z0-9_]*|\d+)(:?[-=+?])?(.*)$", body, re.DOTALL)
            if match is None:
                if body in ("@", "*") or body.isdigit():
                    self.script.warn(f"${{{body}}} (the script's own arguments) taken as empty")
                    return ""
                return "${" + body + "}"
            name, op, rest = match.groups()
            value = (
                self._lookup(name)
                if op is None
                else self.script.variables.get(name, self.env.get(name))
            )
            if op in (":+", "+"):
                # bash: the word when set (":+": and not empty), else nothing; never the value.
                if value is None or (op == ":+" and value == ""):
                    return ""
                if name not in self.script.variables and not name.isdigit():
                    self.script.warn(f"${name} taken from this environment: {value!r}")
                return _Reader(rest, self.env, self.script).word_text()
            if op in (":-", "-", ":=", "="):
                if value is None or (op.startswith(":") and value == ""):
                    value = _Reader(rest, self.env, self.script).word_text()
                    if op in (":=", "="):
                        self.script.variables[name] = value
                elif name not in self.script.variables and not name.isdigit():
                    self.script.warn(f"${name} taken from this environment: {value!r}")
            if value is None:
                self.script.warn(f"${name} is not set here; left as written")
                self.script.unset.add(name)
                return "${" + body + "}"
            return value
        if nxt in ("@", "*", "#") or nxt.isdigit():
            self.i = i + 2
            if nxt in ("@", "*") or nxt.isdigit():
                self.script.warn(f"${nxt} (the script's own arguments) taken as empty")
                return ""
            return "0"
        match = _NAME.match(text, i + 1)
        if match is None:
            self.i = i + 1
            return "$"
        self.i = match.end()
        value = self._lookup(match.group())
        if value is None:
            self.script.warn(f"${match.group()} is not set here; left as written")
            self.script.unset.add(match.group())
            return "$" + match.group()
        return value

    # -- words ----------------------------------------------------------------------------

    def word_text(self) -> str:
        """The whole remaining text expanded as one word (used for ``${X:-default}``)."""
        out = []
        while self.i < len(self.text):
            char = self.text[self.i]
            if char == "'":
                end = self.text.find("'", self.i + 1)
                end = len(self.text) if end < 0 else end
                out.append(self.text[self.i + 1 : end])
                self.i = end + 1
            elif char == '"':
                out.append(self._double())
            elif char == "$":
                out.append(self._dollar())
            elif char == "\\" and self.i + 1 < len(self.text):
                out.append(self.text[self.i + 1])
                self.i += 2
            else:
                out.append(char)
                self.i += 1
        return "".join(out)

    def _unclosed(self, quote: str, start: int) -> None:
        """Refuse a quote that is never closed: bash would not run such a script either."""
        line = self.text.count("\n", 0, start) + 1
        snippet = self.text[start : start + 40].split("\n", 1)[0]
        raise UnclosedQuoteError(
            f"the {quote} quote opened on line {line} ({snippet!r}) is never closed; close it "
            "(bash refuses this script too)"
        )

    def _double(self) -> str:
        out = []
        start = self.i
        self.i += 1
        while self.i < len(self.text) and self.text[self.i] != '"':
            char = self.text[self.i]
            if char == "\\" and self.text[self.i + 1 : self.i + 2] in ('"', "\\", "$", "`", "\n"):
                if self.text[self.i + 1] != "\n":
                    out.append(self.text[self.i + 1])
                self.i += 2
            elif char == "$":
                out.append(self._dollar())
            elif char == "`":
                end = self.text.find("`", self.i + 1)
                raw = self.text[self.i : end + 1]
                self.script.warn(f"{raw} is a command substitution; not run, left as written")
                out.append(raw)
                self.i = end + 1
            else:
                out.append(char)
                self.i += 1
        if self.i >= len(self.text):
            self._unclosed('"', start)
        self.i += 1
        return "".join(out)

    def commands(self) -> None:
        """Read the whole text into ``script.commands`` (assignments update ``variables``)."""
        words: list[str] = []
        current: list[str] | None = None
        skip_next = quoted = False

        def end_word() -> None:
            nonlocal current, skip_next, quoted
            if current is not None:
                word = "".join(current)
                if skip_next:
                    skip_next = False
                elif _SPLIT in word:  # an array's elements, each its own word
                    words.extend(piece for piece in word.split(_SPLIT) if piece)
                elif word or quoted:  # an unquoted empty expansion is no word
                    words.append(word)
            current, quoted = None, False

        def end_command() -> None:
            nonlocal words
            end_word()
            if words:
                self._finish(words)
            words = []

        text = self.text
        while self.i < len(text):
            char = text[self.i]
            if char == "\\" and text[self.i + 1 : self.i + 2] == "\n":
                self.i += 2
            elif char == "\\":
                current = (current or []) + [text[self.i + 1 : self.i + 2]]
                self.i += 2
            elif char == "'":
                end = text.find("'", self.i + 1)
                if end < 0:
                    self._unclosed("'", self.i)
                current = (current or []) + [text[self.i + 1 : end]]
                self.i, quoted = end + 1, True
            elif char == '"':
                current = (current or []) + [self._double()]
                quoted = True
            elif char == "$":
                # An unquoted expansion is split into words at whitespace, as bash does.
                value = self._dollar()
                if not any(c.isspace() for c in value):
                    current = (current or []) + [value]
                    continue
                if value[:1].isspace():
                    end_word()
                pieces = value.split()
                for index, piece in enumerate(pieces):
                    if index:
                        end_word()
                    current = (current or []) + [piece]
                if value[-1:].isspace():
                    end_word()
            elif char == "`":
                end = text.find("`", self.i + 1)
                raw = text[self.i : end + 1]
                self.script.warn(f"{raw} is a command substitution; not run, left as written")
                current = (current or []) + [raw]
                self.i = end + 1
            elif (
                char == "("
                and current is not None
                and (assignment := _ARRAY_ASSIGNMENT.fullmatch("".join(current)))
            ):
                self._array(assignment.group(1), append=bool(assignment.group(2)))
                current = None
            elif char == "#" and current is None:
                end = text.find("\n", self.i)
                self.i = len(text) if end < 0 else end
            elif char in " \t":
                end_word()
                self.i += 1
            elif char in "\n;&|":
                end_command()
                self.i += 1
            elif char in "<>":
                if current is not None and "".join(current).isdigit():
                    current = None  # the fd of "2> file"
                end_word()
                j = self.i
                while j < len(text) and (text[j] in "<>&" or (text[j].isdigit() and j > self.i)):
                    j += 1
                op = text[self.i : j]
                self.i = j
                skip_next = not re.search(r"&\d$", op)
            else:
                current = (current or []) + [char]
                self.i += 1
        end_command()

    def _finish(self, words: list[str]) -> None:
        if self.collected is not None:
            self.collected.extend(words)
            return
        body = words[1:] if words[0] in ("export", "local", "readonly", "declare") else words
        if body and all(_ASSIGNMENT.match(w) for w in body):
            for word in body:
                name, _, value = word.partition("=")
                self.script.variables[name] = value
            return
        while words and _ASSIGNMENT.match(words[0]):  # VAR=x cmd: the command's own env
            words = words[1:]
        if words:
            self.script.commands.append(words)


def split_script(text: str, env: Mapping[str, str] | None = None) -> Script:
    """The commands of shell ``text``, expanded against its assignments and ``env``."""
    import os

    script = Script()
    _Reader(text, os.environ if env is None else env, script).commands()
    return script


def arguments_after(
    script: Script, is_program: object, *, what: str
) -> tuple[list[str], list[str]] | None:
    """Words of the first command naming the program, before and after it.

    ``is_program(words, index)`` says whether ``words[index]`` is the program
    (e.g. ``verl.trainer.main_ppo`` after ``-m``). Returns ``(before, after)``
    or ``None`` when no command runs it. ``what`` names it in warnings.
    """
    found = [
        (words, i)
        for words in script.commands
        for i in range(len(words))
        if is_program(words, i)  # type: ignore[operator]
    ]
    if not found:
        return None
    if len({id(w) for w, _ in found}) > 1:
        script.warn(f"the script runs {what} more than once; the first command is imported")
    words, index = found[0]
    return words[:index], words[index + 1 :]
