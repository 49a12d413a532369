"""Text read from a file, made safe to print on a terminal and in a CI log.

A kernel name, a reason, a message or a path difftest prints may come from a file someone
else wrote (a report, a reproducer, a case log, a ``--known`` file, a variant log). Printed
as is, it could hold an escape sequence that rewrites the terminal, a carriage return that
hides what came before it on the line, a newline that starts a line of its own, or begin a
line with a CI workflow command: GitHub Actions acts on ``::error::``, ``::add-mask::`` or
``::stop-commands::`` at the start of a log line, Azure Pipelines and TeamCity on ``##vso[``,
``##[`` and ``##teamcity[``. So:

- ``cell(text)``: one line: every character that is not printable (``str.isprintable``:
  control characters, the bidirectional overrides, line and paragraph separators) is
  written as its Python escape (``\\x1b``, ``\\r``, ``\\u202e``), and a text that starts
  (after spaces) with ``::`` or ``##`` gets its first character escaped (``\\x3a:error``), so
  it cannot be a workflow command wherever it lands on a line;
- ``block(text)``: the same for each line of a text difftest composed (a table, a case's
  verdicts), line breaks kept.

Every table (``report.write.text_table``), the gate's report, a campaign's block, a
replayed reproducer and the pytest summary go through one of them.
"""

WORKFLOW_MARKS = ("::", "##")  # line starts a CI runner treats as a command


def _escape(c: str) -> str:
    return c if c.isprintable() else repr(c)[1:-1]


def cell(text) -> str:
    """``text`` on one line, every non-printable character escaped and a workflow-command
    start neutralised (module docstring)."""
    s = "".join(_escape(c) for c in str(text))
    body = s.lstrip(" ")
    if body.startswith(WORKFLOW_MARKS):
        s = s[: len(s) - len(body)] + f"\\x{ord(body[0]):02x}" + body[1:]
    return s


def block(text) -> str:
    """Each line of ``text`` made a ``cell``; the line breaks stay."""
    return "\n".join(cell(line) for line in str(text).split("\n"))
