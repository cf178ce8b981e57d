"""kiln's expression language (schema/MANIFEST.md, "Expressions"), evaluated in Python the way
libkiln evaluates it: 64-bit integers, C's truncating division, cdiv/min/max, comparisons and
&& / || in conditions, and addr(p) there. The exporters use it to check fixed shapes and tests and
to size test vectors."""
import ast
import re

from .errors import ExportError

_FUNCTIONS = ("cdiv", "min", "max")
# What addr(p) reads when a test or a fixed shape is judged: kiln pack judges a test's tensors at
# address 256, where `kiln verify --run` gives each its own allocation (aligned to 256 at least).
TEST_TENSOR_ADDRESS = 256


def paren(expr):
    """`expr` as an operand: names and integers as they are, anything else in parentheses."""
    text = str(expr).strip()
    return text if re.fullmatch(r"[A-Za-z_]\w*|\d+", text) else f"({text})"


def names_in(expr):
    """The names an expression uses: scalars, and the pointers addr() reads."""
    return set(re.findall(r"[A-Za-z_]\w*", str(expr))) - set(_FUNCTIONS) - {"addr"}


def _tdiv(a, b):
    if b == 0:
        raise ExportError("division by zero")
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def evaluate(expr, env):
    """The value of `expr` (an int, or a string in kiln's language) for the scalars in `env`."""
    if isinstance(expr, int):
        return expr
    source = str(expr).replace("&&", " and ").replace("||", " or ")
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError:
        raise ExportError(f"expression {expr!r}: not in kiln's expression language") from None

    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in env:
                raise ExportError(f"expression {expr!r}: unknown name {node.id!r} (known: {', '.join(sorted(env))})")
            return int(env[node.id])
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        if isinstance(node, ast.BinOp) and type(node.op) in (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Mod):
            a, b = ev(node.left), ev(node.right)
            op = type(node.op)
            if op is ast.Add:
                return a + b
            if op is ast.Sub:
                return a - b
            if op is ast.Mult:
                return a * b
            if op is ast.Div:
                return _tdiv(a, b)
            return a - _tdiv(a, b) * b
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "addr" \
                and len(node.args) == 1 and isinstance(node.args[0], ast.Name) and not node.keywords:
            return TEST_TENSOR_ADDRESS
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS \
                and len(node.args) == 2 and not node.keywords:
            a, b = ev(node.args[0]), ev(node.args[1])
            if node.func.id == "cdiv":
                if b == 0:
                    raise ExportError(f"expression {expr!r}: division by zero")
                return -((-a) // b)  # the exact ceiling of a / b (Python's // floors)
            return min(a, b) if node.func.id == "min" else max(a, b)
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            a, b = ev(node.left), ev(node.comparators[0])
            return {ast.Eq: a == b, ast.NotEq: a != b, ast.Lt: a < b, ast.LtE: a <= b, ast.Gt: a > b,
                    ast.GtE: a >= b}[type(node.ops[0])]
        if isinstance(node, ast.BoolOp):
            values = [ev(v) for v in node.values]  # every operand, as libkiln does (no short-circuit)
            return all(values) if isinstance(node.op, ast.And) else any(values)
        raise ExportError(f"expression {expr!r}: not in kiln's expression language")

    try:
        return ev(tree)
    except ExportError as e:
        if str(e) == "division by zero":
            raise ExportError(f"expression {expr!r}: division by zero for {env}") from None
        raise
