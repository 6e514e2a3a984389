"""The theory's plain-text formulas typeset for the site: math code spans become TeX.

``proofs/theory.md`` writes its formulas as code spans in plain text (`` `u < min(1, p/q)` ``,
`` `Σ_x max(0, p − q) = 1 − α` ``), so that they read the same in a terminal, in the proof
scripts' messages and on the site. For the site, each code span that is a formula becomes
inline TeX (``$u < \\min(1, p/q)$``), which ``pymdownx.arithmatex`` hands to MathJax; a span
that is code (a name with an underscore, a path, a call of a library function, an English
phrase, Python's ``==``) stays a code span.

A span is a formula when every word in it is a math word (``MATH_WORDS``: one letter with an
optional index, a Greek letter, an operator name such as ``min``, ``norm``, ``TV``) and it holds
none of the marks of code (``CODE_MARKS``). The translation is literal: Unicode symbols to TeX
commands (``SYMBOLS``), operator names to ``\\operatorname``, ``^(k+1)`` and ``_<i`` to braced
scripts, ``..`` to ``\\ldots``, ``~`` to ``\\sim``, ``|`` to ``\\mid`` between spaces and to
``\\vert`` otherwise (so a formula in a table never splits a cell). ``check_tex`` refuses a
translation with an unbalanced brace, a stray Unicode symbol or an unknown command, so a
formula the translation cannot handle fails the site's build instead of rendering wrong.
"""

import re

__all__ = ["CODE_MARKS", "MATH_WORDS", "SYMBOLS", "check_tex", "is_formula", "to_tex", "typeset"]

SYMBOLS = {
    "−": "-",
    "≤": r"\le ",
    "≥": r"\ge ",
    "≠": r"\ne ",
    "≈": r"\approx ",
    "·": r"\cdot ",
    "×": r"\times ",
    "Σ": r"\sum ",
    "∑": r"\sum ",
    "Π": r"\prod ",
    "∏": r"\prod ",
    "∈": r"\in ",
    "∉": r"\notin ",
    "∩": r"\cap ",
    "∪": r"\cup ",
    "⊆": r"\subseteq ",
    "∅": r"\emptyset ",
    "∞": r"\infty ",
    "→": r"\to ",
    "↦": r"\mapsto ",
    "½": r"\tfrac{1}{2}",
    "∎": r"\blacksquare ",
    "α": r"\alpha ",
    "β": r"\beta ",
    "γ": r"\gamma ",
    "δ": r"\delta ",
    "ε": r"\varepsilon ",
    "η": r"\eta ",
    "θ": r"\theta ",
    "λ": r"\lambda ",
    "μ": r"\mu ",
    "π": r"\pi ",
    "ρ": r"\rho ",
    "σ": r"\sigma ",
    "τ": r"\tau ",
    "φ": r"\varphi ",
    "ω": r"\omega ",
    "ζ": r"\zeta ",
    "ι": r"\iota ",
    "κ": r"\kappa ",
    "ν": r"\nu ",
    "ξ": r"\xi ",
    "υ": r"\upsilon ",
    "χ": r"\chi ",
    "ψ": r"\psi ",
    "ϕ": r"\phi ",
    "Ξ": r"\Xi ",
    "Δ": r"\Delta ",
    "Γ": r"\Gamma ",
    "Θ": r"\Theta ",
    "Λ": r"\Lambda ",
    "Φ": r"\Phi ",
    "Ψ": r"\Psi ",
    "Ω": r"\Omega ",
    "ℓ": r"\ell ",
    "←": r"\leftarrow ",
    "µ": r"\mu ",
}
OPERATORS = ("argmax", "argmin", "softmax", "norm", "TV", "KL", "Var", "Exp", "path", "Cov")
FUNCTIONS = ("min", "max", "log", "exp")  # TeX has its own commands for these
MATH_WORDS = re.compile(
    r"(?:[A-Za-z](?:_?\d+)?|" + "|".join(OPERATORS + FUNCTIONS) + r"|[α-ωΑ-Ω])\Z"
)
CODE_MARKS = ("==", "<=", ">=", "!=", "**", '"', "`", "$", "\\", "#", ":", ";", "@", "--")
WORD = re.compile(r"[A-Za-zα-ωΑ-Ω]+\d*")
KNOWN_COMMANDS = set(
    re.findall(r"\\([A-Za-z]+)", " ".join(SYMBOLS.values()))
    + list(FUNCTIONS)
    + ["operatorname", "ldots", "sim", "mid", "vert", "tfrac"]
)


def is_formula(span: str) -> bool:
    """Whether the code span ``span`` is a formula: every word a math word, no code marks.

    Example:
        >>> is_formula("Σ_x min(p, q)(x)"), is_formula("specdec.verify_tokens")
        (True, False)
    """
    text = span.replace(r"\|", "|")
    if not text.strip() or text != text.strip() or any(mark in text for mark in CODE_MARKS):
        return False
    if re.search(r"(?<!\.)\.[A-Za-z_]", text):  # a module, a method, a file name
        return False
    return all(MATH_WORDS.match(word) for word in WORD.findall(text.replace("_", " ")))


SUPERSCRIPTS = dict(zip("⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺ⁿⁱ", "0123456789-+ni", strict=True))
SUBSCRIPTS = dict(zip("₀₁₂₃₄₅₆₇₈₉₋₊", "0123456789-+", strict=True))


def _unicode_scripts(text: str) -> str:
    """Runs of Unicode superscripts and subscripts (``F⁻¹``, ``x₁``) as ``^{-1}``, ``_{1}``."""
    for table, mark in ((SUPERSCRIPTS, "^"), (SUBSCRIPTS, "_")):
        run = "[" + "".join(table) + "]+"
        text = re.sub(
            run, lambda m, t=table, s=mark: s + "{" + "".join(t[c] for c in m[0]) + "}", text
        )
    return text


def _scripts(text: str) -> str:
    """``^(k+1)`` and ``^-40`` as ``^{k+1}``, ``^{-40}``; ``_<i`` as ``_{<i}``."""
    text = re.sub(r"\^\(([^()]*)\)", r"^{\1}", text)
    text = re.sub(r"\^(-?\d+)", r"^{\1}", text)
    text = re.sub(r"_<([A-Za-z0-9]+)", r"_{<\1}", text)
    text = re.sub(r"_(\d{2,})", r"_{\1}", text)
    return text


def _set_braces(text: str) -> str:
    """Braces after ``_`` or ``^`` group a script; any other pair is a set: ``\\{ .. \\}``."""
    out, stack = [], []
    for index, char in enumerate(text):
        if char == "{":
            grouping = index > 0 and text[index - 1] in "_^"
            stack.append(grouping)
            out.append("{" if grouping else r"\{")
        elif char == "}" and stack:
            out.append("}" if stack.pop() else r"\}")
        else:
            out.append(char)
    return "".join(out)


def to_tex(span: str) -> str:
    """The formula ``span`` in TeX (call only where ``is_formula(span)``).

    Example:
        >>> to_tex("r = norm(max(0, p − q))")
        'r = \\\\operatorname{norm}(\\\\max(0, p - q))'
    """
    text = span.replace(r"\|", "|").replace("\n", " ").replace("−", "-")
    text = text.replace("...", "..").replace("..", r" \ldots ")
    text = re.sub(r" \| ", r" \\mid ", text)
    text = text.replace("|", r"\vert ")
    text = text.replace("~", r"\sim ")
    text = re.sub(r"([A-Za-zρ])\*", r"\1^{*}", text)
    text = _set_braces(_scripts(_unicode_scripts(text)))
    for name in OPERATORS:
        text = re.sub(rf"(?<![A-Za-z\\]){name}(?![A-Za-z])", rf"\\operatorname{{{name}}}", text)
    for name in FUNCTIONS:
        text = re.sub(rf"(?<![A-Za-z\\]){name}(?![A-Za-z])", rf"\\{name}", text)
    for symbol, command in SYMBOLS.items():
        text = text.replace(symbol, command)
    text = re.sub(r" +", " ", text).strip()
    return text


def check_tex(tex: str) -> None:
    """Refuse a translation MathJax could not typeset as meant.

    Raises:
        ValueError: an unbalanced brace or parenthesis, a character outside ASCII, or a command
            the translation does not write.
    """
    depth = 0
    for char in tex.replace(r"\{", "").replace(r"\}", ""):
        depth += {"{": 1, "}": -1}.get(char, 0)
        if depth < 0:
            break
    if depth != 0:
        raise ValueError(f"Unbalanced braces in the formula {tex!r}.")
    if not tex.isascii():
        raise ValueError(f"A symbol with no TeX translation in the formula {tex!r}.")
    unknown = set(re.findall(r"\\([A-Za-z]+)", tex)) - KNOWN_COMMANDS
    if unknown:
        raise ValueError(f"Unknown TeX command(s) {sorted(unknown)} in the formula {tex!r}.")


CODE_SPAN = re.compile(r"(?<!`)`([^`]+)`(?!`)")
FENCE = re.compile(r"^```.*?^```[^\n]*$", re.MULTILINE | re.DOTALL)


def typeset(markdown: str) -> str:
    """``markdown`` with each formula code span as inline TeX (``$...$``), fenced blocks kept.

    Example:
        >>> typeset("accept iff `u < min(1, p/q)`, in `verify_tokens`")
        'accept iff $u < \\\\min(1, p/q)$, in `verify_tokens`'
    """

    def span(match: re.Match[str]) -> str:
        body = match[1]
        if not is_formula(body):
            return match[0]
        tex = to_tex(body)
        check_tex(tex)
        return f"${tex}$"

    pieces, last = [], 0
    for fence in FENCE.finditer(markdown):
        pieces.append(CODE_SPAN.sub(span, markdown[last : fence.start()]))
        pieces.append(fence[0])
        last = fence.end()
    pieces.append(CODE_SPAN.sub(span, markdown[last:]))
    return "".join(pieces)
