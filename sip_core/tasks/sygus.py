"""SyGuS-Comp 2017 PBE-Strings benchmarks (``*-long.sl``) → (input, output) text-editing pairs.

Every ``(constraint (= (f "a1" ["a2"]) "out"))`` is one example; the arguments of two-argument tasks
are joined by one space (the paper's examples: ``Jane Doe → Doe Jane``). The file is parsed as
s-expressions, so comments, multi-line constraints and SMT-LIB string escapes are handled.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sip_core.errors import SipError
from sip_core.tasks.sexpr import Node, Str, Symbol, parse

# The paper's 19 tasks: all *-long.sl except bikes (too little data), univ_1..6 (two long arguments)
# and name-combine (the identity after concatenating the arguments).
TASKS = (
    "dr-name", "firstname", "initials", "lastname", "name-combine-2", "name-combine-3", "name-combine-4",
    "phone", *(f"phone-{i}" for i in range(1, 11)), "reverse-name",
)
EXCLUDED = ("bikes", *(f"univ_{i}" for i in range(1, 7)), "name-combine")
_GROUPS = {"reverse-name": "rev-name", "name-combine-4": "sur-initial"}  # the rest are FST-solvable


def group_of(task: str) -> str:
    return _GROUPS.get(task, "fst")


def source_name(task: str) -> str:
    """The registry name (and relative path under ``--raw``) of a task's file."""
    if task not in TASKS and task not in EXCLUDED:
        raise SipError(f"unknown SyGuS task {task!r}; the paper's tasks: {', '.join(TASKS)}")
    return f"sygus_pbe_strings_2017/{task}-long.sl"


@dataclass(frozen=True)
class SygusFile:
    path: str
    function: str
    params: tuple[str, ...]
    pairs: list[tuple[str, str]]
    duplicates: int  # extra copies of an identical pair (kept, as the original would)

    def summary(self) -> str:
        return (f"{self.path}: {len(self.pairs)} constraints → {len(self.pairs)} examples, "
                f"{len(self.params)} argument(s), {self.duplicates} duplicate pairs")


def _head(node) -> str | None:
    return node.items[0] if isinstance(node, Node) and node.items and isinstance(node.items[0], Symbol) else None


def _synth_fun(exprs: list, where: str) -> tuple[str, tuple[str, ...]]:
    funs = [e for e in exprs if _head(e) == "synth-fun"]
    if len(funs) != 1:
        raise SipError(f"{where}: expected exactly one synth-fun, found {len(funs)}")
    items = funs[0].items
    if len(items) < 3 or not isinstance(items[2], Node):
        raise SipError(f"{where}:{funs[0].line}: malformed synth-fun")
    params = tuple(str(p.items[0]) for p in items[2].items if isinstance(p, Node) and p.items)
    return str(items[1]), params


def _example(constraint: Node, function: str, arity: int, where: str) -> tuple[str, str]:
    body = constraint.items[1] if len(constraint.items) == 2 else None
    if _head(body) != "=" or len(body.items) != 3:
        raise SipError(f"{where}: constraint is not (= (f ...) \"output\")")
    call, out = body.items[1], body.items[2]
    if isinstance(call, Str) and isinstance(out, Node):  # (= "output" (f ...)) means the same
        call, out = out, call
    if _head(call) != function or not isinstance(out, Str):
        raise SipError(f"{where}: constraint is not (= ({function} ...) \"output\")")
    args = call.items[1:]
    if len(args) != arity or not all(isinstance(a, Str) for a in args):
        raise SipError(f"{where}: expected {arity} string literal argument(s) to {function}")
    return " ".join(args), str(out)


def read_sygus(path: str | Path) -> SygusFile:
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as err:
        raise SipError(f"{path}: cannot read SyGuS file ({err.strerror or err})") from None
    except UnicodeDecodeError as err:
        raise SipError(f"{path}: not valid UTF-8 (byte offset {err.start})") from None
    exprs = parse(text, str(path))
    function, params = _synth_fun(exprs, str(path))
    pairs = [_example(e, function, len(params), f"{path}:{e.line}")
             for e in exprs if _head(e) == "constraint"]
    if not pairs:
        raise SipError(f"{path}: no constraints found")
    return SygusFile(str(path), function, params, pairs, len(pairs) - len(set(pairs)))
