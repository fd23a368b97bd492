"""Grammars of the reproduction, written here: SyGuS-style bit-vector and string programs, JSON, SQL.

Each :class:`Grammar` has a bounded-depth regular form (``regex``, for the pure-Python
:class:`~cars_sampling.DFAConstraint`) and a Lark form (``lark``, for
:class:`~cars_sampling.llguidance_backend.LLGuidanceConstraint`) with the same strings (tested both
ways). They mimic the paper's domains (SyGuS BV4 and SLIA, fuzzing JSON/SQL) at a size a CPU can
sample from; the paper's own grammars live in ``pparys/cars``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from cars_sampling.constraints import Constraint, DFAConstraint


def _nest(atom: str, unary: str, binary: str, depth: int) -> str:
    """Regex of s-expressions ``atom | (unary e) | (binary e e)`` nested ``depth`` levels."""
    expr = atom
    for _ in range(depth):
        expr = rf"(?:{atom}|\((?:{unary}) {expr}\)|\((?:{binary}) {expr} {expr}\))"
    return expr


_BV_ATOM = r"(?:x|y|#x[0-9a-f]{2})"
_BV_UNARY = "bvnot|bvneg"
_BV_BINARY = "bvand|bvor|bvxor|bvadd|bvsub|bvshl|bvlshr"

_STR_ATOM = r'(?:name|" "|"\."|"[a-z]{1,3}")'
_STR_INT = r"(?:[0-9]|\(str\.len name\))"
_STR_EXPR1 = (
    rf"(?:{_STR_ATOM}|\(str\.\+\+ {_STR_ATOM} {_STR_ATOM}\)|\(str\.at name {_STR_INT}\)"
    rf"|\(str\.substr name {_STR_INT} {_STR_INT}\)|\(str\.replace name {_STR_ATOM} {_STR_ATOM}\))"
)
_STR_EXPR2 = rf"(?:{_STR_EXPR1}|\(str\.\+\+ {_STR_EXPR1} {_STR_EXPR1}\))"

_COL = "(?:id|name|age|total)"
_SQL = (
    rf"SELECT (?:\*|{_COL}(?:, {_COL}){{0,2}}) FROM (?:users|orders)"
    rf"(?: WHERE {_COL} (?:=|<|>) [0-9]{{1,3}}(?: (?:AND|OR) {_COL} (?:=|<|>) [0-9]{{1,3}})?)?;"
)

_JSON = (
    r'\{"name": "[A-Za-z]{1,8}", "age": [0-9]{1,2}'
    r'(?:, "tags": \[(?:"[a-z]{1,5}"(?:, "[a-z]{1,5}"){0,2})?\])?\}'
)

JSON_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "pattern": "^[A-Za-z]{1,8}$"},
        "age": {"type": "integer", "minimum": 0, "maximum": 99},
        "tags": {
            "type": "array",
            "items": {"type": "string", "pattern": "^[a-z]{1,5}$"},
            "maxItems": 3,
        },
    },
    "required": ["name", "age"],
    "additionalProperties": False,
}


def _alternatives(ops: str) -> str:
    return " | ".join(f'"{op}"' for op in ops.split("|"))


@dataclasses.dataclass(frozen=True)
class Grammar:
    """A named constraint in two forms; ``prompt`` is the instruction the reproduction gives the LM."""

    name: str
    regex: str
    lark: str | None
    prompt: str
    description: str

    def constraint(
        self, tokenizer: Any, backend: Literal["dfa", "llguidance"] = "dfa", **kwargs: Any
    ) -> Constraint:
        """The constraint over ``tokenizer``'s vocabulary, pure-Python (``dfa``) or ``llguidance``."""
        if backend == "dfa":
            return DFAConstraint.from_regex(self.regex, tokenizer, **kwargs)
        if backend == "llguidance":
            from cars_sampling.llguidance_backend import LLGuidanceConstraint

            if self.lark is None:
                return LLGuidanceConstraint.from_regex(self.regex, tokenizer, **kwargs)
            return LLGuidanceConstraint.from_grammar(self.lark, tokenizer, **kwargs)
        raise ValueError(f"backend must be 'dfa' or 'llguidance', got {backend!r}")


GRAMMARS: dict[str, Grammar] = {
    "bv4": Grammar(
        name="bv4",
        regex=_nest(_BV_ATOM, _BV_UNARY, _BV_BINARY, depth=2),
        lark=(
            "start: e2\n"
            'e2: atom | "(" UN " " e1 ")" | "(" BIN " " e1 " " e1 ")"\n'
            'e1: atom | "(" UN " " atom ")" | "(" BIN " " atom " " atom ")"\n'
            'atom: "x" | "y" | HEX\n'
            "HEX: /#x[0-9a-f]{2}/\n"
            f"UN: {_alternatives(_BV_UNARY)}\n"
            f"BIN: {_alternatives(_BV_BINARY)}\n"
        ),
        prompt="; SyGuS BV: a bit-vector program f(x, y)\n",
        description="SyGuS-style bit-vector terms over x, y and hex constants, depth <= 2",
    ),
    "slia": Grammar(
        name="slia",
        regex=_STR_EXPR2,
        lark=(
            "start: e2\n"
            'e2: e1 | "(str.++ " e1 " " e1 ")"\n'
            'e1: atom | "(str.++ " atom " " atom ")" | "(str.at name " int ")"\n'
            '    | "(str.substr name " int " " int ")" | "(str.replace name " atom " " atom ")"\n'
            'atom: "name" | STR\n'
            'int: DIGIT | "(str.len name)"\n'
            'STR: /"( |\\.|[a-z]{1,3})"/\n'
            "DIGIT: /[0-9]/\n"
        ),
        prompt="; SyGuS SLIA: a string program of name\n",
        description="SyGuS-style string terms (str.++, str.at, str.substr, str.replace), depth <= 2",
    ),
    "json": Grammar(
        name="json",
        regex=_JSON,
        lark=(
            'start: "{" KEY_NAME NAME "\\", " KEY_AGE AGE tags? "}"\n'
            'tags: ", " KEY_TAGS "[" (TAG | TAG ", " TAG | TAG ", " TAG ", " TAG)? "]"\n'
            'KEY_NAME: "\\"name\\": \\""\n'
            'KEY_AGE: "\\"age\\": "\n'
            'KEY_TAGS: "\\"tags\\": "\n'
            "NAME: /[A-Za-z]{1,8}/\n"
            "AGE: /[0-9]{1,2}/\n"
            'TAG: /"[a-z]{1,5}"/\n'
        ),
        prompt="// a JSON record of a person\n",
        description="a flat JSON record: name, age, optional tags list (<= 3 tags)",
    ),
    "sql": Grammar(
        name="sql",
        regex=_SQL,
        lark=(
            'start: "SELECT " cols " FROM " TABLE where? ";"\n'
            'cols: "*" | COL | COL ", " COL | COL ", " COL ", " COL\n'
            'where: " WHERE " cond (" " LOGIC " " cond)?\n'
            'cond: COL " " OP " " NUM\n'
            'COL: "id" | "name" | "age" | "total"\n'
            'TABLE: "users" | "orders"\n'
            'OP: "=" | "<" | ">"\n'
            'LOGIC: "AND" | "OR"\n'
            "NUM: /[0-9]{1,3}/\n"
        ),
        prompt="-- a SQL query\n",
        description="SELECT ... FROM ... [WHERE a op n [AND|OR b op n]];",
    ),
}
