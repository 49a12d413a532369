"""JUnit XML for ``difftest gate``: what CI dashboards read.

One ``<testsuite>`` per kernel, one ``<testcase>`` per kernel x output x gate (classname
``difftest.<kernel>``, name ``<output>:<gate>``; ``all:run`` holds kernel errors and
``coverage`` the kernel's coverage). A blocking finding is a ``<failure>`` whose text
carries the problem (the shrunk one when the campaign shrank it) and the reproducer path;
a known failure (failing in the baseline too) is ``<skipped>`` with the same text, so the
file agrees with the gate's exit code without hiding anything. Each of the candidate's
findings (one per distinct bug) is its own testcase ``finding <id>``: its signature, the
cases that hit it, when first seen, its shrunk problem and reproducer; a failure when the
baseline does not have it, skipped when it does.
"""

import re
import xml.etree.ElementTree as ET

from difftest.vocab import FindingKind

# characters XML 1.0 cannot hold (kernel errors can carry ANSI colour codes, NULs)
_BAD_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _clean(text: str) -> str:
    return _BAD_XML.sub("?", text)


def _detail(f) -> str:
    lines = [f.message]
    if f.case:
        lines.append(("shrunk problem: " if f.shrunk else "problem (not shrunk): ") + f.case.problem.to_json())
        lines += [f"  {v.message}" for v in f.case.verdicts if not v.passed and v.message]
        if f.case.reason:
            lines.append(f"reason: {f.case.reason.strip()}")
    lines.append(
        f"reproducer: {f.reproducer}"
        if f.reproducer
        else "reproducer: none written (not the campaign's "
        "shrunk failure; replay the problem above with `difftest repro`)"
        if f.case
        else ""
    )
    return _clean("\n".join(x for x in lines if x))


def junit_xml(res) -> str:
    suites = ET.Element("testsuites", name="difftest gate")
    by_kernel: dict = {}
    for (kernel, name), findings in res.testcases.items():
        by_kernel.setdefault(kernel, []).append((name, findings))
    total = fails = skips = 0
    for kernel, cases in by_kernel.items():
        suite = ET.SubElement(suites, "testsuite", name=f"difftest.{kernel}")
        n_fail = n_skip = 0
        for name, findings in cases:
            tc = ET.SubElement(suite, "testcase", classname=f"difftest.{kernel}", name=name)
            blocking = [f for f in findings if f.blocking]
            known = [f for f in findings if not f.blocking]
            if blocking:
                n_fail += 1
                el = ET.SubElement(
                    tc,
                    "failure",
                    message=_clean(blocking[0].message.splitlines()[0][:500]),
                    type=",".join(dict.fromkeys(f.kind for f in blocking)),
                )
                el.text = "\n\n".join(_detail(f) for f in blocking)
            elif known:
                n_skip += 1
                why = (
                    "not reached in the candidate's search budget: "
                    if known[0].kind == FindingKind.INCOMPLETE
                    else "known failure (fails in the baseline too): "
                )
                el = ET.SubElement(tc, "skipped", message=_clean(why + known[0].message.splitlines()[0][:400]))
                el.text = "\n\n".join(_detail(f) for f in known)
        suite.set("tests", str(len(cases)))
        suite.set("failures", str(n_fail))
        suite.set("errors", "0")
        suite.set("skipped", str(n_skip))
        total, fails, skips = total + len(cases), fails + n_fail, skips + n_skip
    suites.set("tests", str(total))
    suites.set("failures", str(fails))
    suites.set("errors", "0")
    suites.set("skipped", str(skips))
    ET.indent(suites)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
