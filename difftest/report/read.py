"""Reading report.json files back (for ``gate``, ``merge`` and ``report --html``) as the types
that wrote them, and the per-gate numbers those commands recompute from a report's cases.

A report is data written by ``reports.write_json``: ``{"difftest_report": 1, "campaigns":
[{"kernel", "status", "cases": [case records], "coverage", "settings", ...}]}``. Files
ending in ``.xz`` are read through lzma (the raw reports under results/ are compressed).
``load_report`` checks every field the readers use and hands back the document (what
``difftest sanitize`` edits in place); ``Report.of`` reads a document as a ``Report``: each
campaign the ``CampaignResult`` that wrote it (``CampaignResult.from_dict``), each case a
``CaseResult`` with its ``Verdict``s (``CaseResult.from_dict``). Anything else is refused
with a ``ReportError`` whose message is one line naming the file, the field and what is
allowed.
"""

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from difftest.errors import FileFormatError
from difftest.model.problem import OUTPUTS, Problem, ProblemError
from difftest.report.write import ratio
from difftest.safeio import NONFINITE, read_json
from difftest.search.shard import ShardError, parse_shard
from difftest.search.signature import Signature, SignatureError
from difftest.vocab import CampaignStatus, Gate, Status

if TYPE_CHECKING:  # annotations only: run/plan imports this module on `difftest list`'s path, which loads no torch
    from difftest.judge.runner import CaseResult
    from difftest.search.result import CampaignResult


class ReportError(FileFormatError):
    """A report that cannot be read or is not one difftest wrote (one line)."""


MAX_REPORT_BYTES = 64 * 2**20  # decompressed; the largest report under results/ is 2.3 MB
REPORT_VERSIONS = (1,)


def load_report(path, root=None) -> "Report":
    """A report read back as the types that wrote it (``Report``), or a one-line ReportError
    naming the file: ``load_report_doc``'s checks, then every campaign, case and verdict
    through its ``from_dict``."""
    return Report.from_dict(load_report_doc(path, root), str(path))


def load_report_doc(path, root=None) -> dict:
    """A report's document read and checked, or a one-line ReportError: its size (an ``.xz`` is
    stream-decompressed up to MAX_REPORT_BYTES, never expanded whole first), its nesting,
    its text (valid Unicode) and every field the readers use. A regular file only; with
    ``root`` (the run folder it was found in) not through a link."""
    path = Path(path)
    doc = read_json(path, ReportError, "report.json written by `difftest run`", MAX_REPORT_BYTES, root=root)
    check_report(doc, path)
    _nonfinite_back(doc)
    return doc


def written_report(text: str, where: str = "report") -> "Report":
    """The report whose text (``write.report_text``) this process has just written, as
    ``load_report`` reads the file back, without a hostile file's checks: the text never left
    the process (``difftest run`` renders its HTML page from it: reading back and checking
    the 6 MB file was 0.3 s of the run's serial end)."""
    doc = json.loads(text)
    _nonfinite_back(doc)
    return Report.from_dict(doc, where)


def _nonfinite_back(doc: dict) -> None:
    """The numbers ``safeio.finite_json`` wrote as "inf"/"-inf"/"nan" (strict JSON) are
    floats again: a case's worst_ratio and its verdicts' numbers."""

    def case(c):
        if isinstance(c, dict):
            if isinstance(c.get("worst_ratio"), str) and c["worst_ratio"] in NONFINITE:
                c["worst_ratio"] = NONFINITE[c["worst_ratio"]]
            for v in c.get("verdicts") or ():
                nums = v.get("numbers") if isinstance(v, dict) else None
                for k, x in (nums or {}).items():
                    if isinstance(x, str) and x in NONFINITE:
                        nums[k] = NONFINITE[x]

    for c in doc.get("campaigns", []):
        for x in c.get("cases") or ():
            case(x)
        case(c.get("failure"))
        for f in c.get("failures") or ():
            case(f.get("failure"))


_NUM = (int, float)
_NONE = type(None)


def _expect(obj: dict, key: str, types, where: str, allowed: str, required: bool = False):
    """obj[key] must be one of ``types`` (absent is fine unless ``required``)."""
    if key not in obj:
        if required:
            raise ReportError(f"{where}: field {key!r} missing: allowed {allowed}")
        return
    v = obj[key]
    allowed_types = types if isinstance(types, tuple) else (types,)
    if not isinstance(v, types) or (isinstance(v, bool) and bool not in allowed_types):
        raise ReportError(f"{where}: field {key!r} is {type(v).__name__} {str(v)[:40]!r}: allowed {allowed}")


def _check_pairs(pairs, where: str) -> None:
    """A campaign's configuration pair coverage (search/configuration_phase.pair_report), or nothing."""
    if pairs is None or pairs == {}:
        return
    if not isinstance(pairs, dict):
        raise ReportError(f"{where}: is {type(pairs).__name__}: allowed an object")
    for key in ("claimed", "covered", "explained"):
        v = pairs.get(key, 0)
        if not isinstance(v, int) or isinstance(v, bool) or v < 0:
            raise ReportError(f"{where}: field {key!r} is {str(v)[:20]!r}: allowed an integer >= 0")
    dims = pairs.get("dimensions", [])
    if not isinstance(dims, list) or not all(isinstance(d, str) and len(d) < 64 for d in dims):
        raise ReportError(f"{where}: field 'dimensions': allowed a list of names")
    by = pairs.get("by_dimensions", {})
    if not isinstance(by, dict) or not all(
        isinstance(v, list) and len(v) == 2 and all(isinstance(x, int) and not isinstance(x, bool) for x in v)
        for v in by.values()
    ):
        raise ReportError(f"{where}: field 'by_dimensions': allowed an object 'a x b' -> [covered, claimed]")
    missing = pairs.get("missing", [])
    if not isinstance(missing, list) or not all(isinstance(m, str) and len(m) < 400 for m in missing):
        raise ReportError(f"{where}: field 'missing': allowed a list of pair names")


def _check_problem(problem: dict, where: str) -> None:
    """A case's Problem must be one: every field known and valid (``Problem.from_dict``), so
    the gate and the HTML report never compare or show what no run could have drawn."""
    try:
        Problem.from_dict(problem)
    except ProblemError as e:
        raise ReportError(f"{where}: field 'problem': {str(e)[:300]}") from None
    except (TypeError, ValueError, KeyError, AttributeError, RecursionError) as e:
        raise ReportError(
            f"{where}: field 'problem' is not a Problem ({type(e).__name__}): allowed the Problem a run recorded"
        ) from None


def _check_case(case, where: str) -> None:
    if not isinstance(case, dict):
        raise ReportError(f"{where}: is {type(case).__name__}: allowed an object (a case record)")
    _expect(case, "problem", dict, where, "an object (a Problem)", required=True)
    _check_problem(case["problem"], where)
    if case.get("status") not in tuple(Status):
        raise ReportError(f"{where}: field 'status' is {str(case.get('status'))[:40]!r}: allowed {'|'.join(Status)}")
    _expect(case, "verdicts", list, where, "a list of verdicts")
    _expect(case, "worst_ratio", _NUM + (str,), where, "a number")
    if isinstance(case.get("worst_ratio"), str) and case["worst_ratio"] not in ("inf", "-inf", "nan"):
        raise ReportError(f"{where}: field 'worst_ratio' is {case['worst_ratio'][:40]!r}: allowed a number")
    _expect(case, "reason", (str, _NONE), where, "a string")
    _expect(case, "failed_gates", list, where, "a list of 'output:gate' strings")
    for key in ("seconds", "kernel_seconds"):
        _expect(case, key, _NUM, where, "a number of seconds")
    for key in ("kernel", "input_digest", "error_type", "error_origin"):
        _expect(case, key, str, where, "a string")
    _expect(case, "notes", list, where, "a list of notes")
    for n, v in enumerate(case.get("verdicts", [])):
        w = f"{where} verdicts[{n}]"
        if not isinstance(v, dict):
            raise ReportError(f"{w}: is {type(v).__name__}: allowed an object (a verdict)")
        _expect(v, "output", str, w, "an output name", required=True)
        _expect(v, "gate", str, w, "a gate name", required=True)
        if v["output"] not in OUTPUTS:
            raise ReportError(f"{w}: field 'output' is {v['output'][:40]!r}: allowed one of {', '.join(OUTPUTS)}")
        if v["gate"] not in tuple(Gate):
            raise ReportError(f"{w}: field 'gate' is {v['gate'][:40]!r}: allowed one of {', '.join(Gate)}")
        _expect(v, "passed", bool, w, "true or false", required=True)
        _expect(v, "numbers", dict, w, "an object of numbers")
        for key in ("runs", "differing", "overflow_limited"):  # what the readers count with
            _expect(v.get("numbers") or {}, key, _NUM + (_NONE,), f"{w} numbers", "a number")
        _expect(v, "worst", (dict, _NONE), w, "an object or null")
        _expect(v, "message", (str, _NONE), w, "a string")


def check_report(doc, path="report") -> None:
    """Every field the gate, merge and HTML report read has the type they expect, else a
    ReportError naming the file, the place, the field and what is allowed."""
    if not isinstance(doc, dict) or "difftest_report" not in doc:
        raise ReportError(f"{path}: not a difftest report (no 'difftest_report' key at the top level)")
    v = doc["difftest_report"]
    if isinstance(v, bool) or v not in REPORT_VERSIONS:
        raise ReportError(
            f"{path}: field 'difftest_report' is {str(v)[:20]!r}: allowed one of {REPORT_VERSIONS} "
            "(a report format this difftest reads)"
        )
    _expect(doc, "campaigns", list, str(path), "a list of campaigns", required=True)
    for i, c in enumerate(doc["campaigns"]):
        where = f"{path}: campaigns[{i}]"
        if not isinstance(c, dict):
            raise ReportError(f"{where}: is {type(c).__name__}: allowed an object (a campaign)")
        _expect(c, "kernel", str, where, "a kernel name", required=True)
        where = f"{path}: campaigns[{i}] ({c['kernel']})"
        if "status" in c and c["status"] not in tuple(CampaignStatus):
            raise ReportError(
                f"{where}: field 'status' is {str(c['status'])[:40]!r}: allowed {'|'.join(CampaignStatus)}"
            )
        for key, types, allowed in (
            ("cases", list, "a list of case records"),
            ("settings", (dict, _NONE), "an object"),
            ("coverage", (dict, _NONE), "an object with 'hit' and 'missing'"),
            ("failure", (dict, _NONE), "a case record or null"),
            ("failures", (list, _NONE), "a list"),
            ("reproducer", (dict, _NONE), "an object"),
            ("reason", (str, _NONE), "a string"),
            ("profile", (str, _NONE), "a profile name"),
            ("elapsed_s", (_NUM, _NONE), "a number"),
            ("compile_stats", (dict, _NONE), "an object"),
            ("compile_keys", (int, _NONE), "an integer"),
            ("unrun", (int, _NONE), "an integer (drawn problems left unrun)"),
        ):
            _expect(c, key, types, where, allowed)
        st = c.get("settings") or {}
        for key, types, allowed in (
            ("seed", (int, _NONE), "an integer or null"),
            ("narrowed", (dict, _NONE), "an object or null"),
            ("config", (dict, _NONE), "an object (the run config)"),
            ("edge_cases", (int, _NONE), "an integer"),
            ("replayed_failures", (int, _NONE), "an integer"),
            ("shard", (str, _NONE), "I/N or null"),
        ):
            _expect(st, key, types, f"{where} settings", allowed)
        if st.get("shard") is not None:
            try:
                parse_shard(st["shard"])
            except ShardError:
                raise ReportError(
                    f"{where} settings: field 'shard' is {st['shard'][:20]!r}: allowed I/N with 0 <= I < N"
                ) from None
        outs = c.get("outputs")
        if outs is not None and (
            not isinstance(outs, dict) or not all(k in OUTPUTS and isinstance(x, dict) for k, x in outs.items())
        ):
            raise ReportError(
                f"{where}: field 'outputs' is not per-output statistics: allowed an object keyed by "
                f"{', '.join(OUTPUTS)}"
            )
        cov = c.get("coverage") or {}
        _expect(cov, "hit", dict, f"{where} coverage", "an object feature -> cases")
        _expect(cov, "missing", list, f"{where} coverage", "a list of features")
        if not all(isinstance(n, int) for n in (cov.get("hit") or {}).values()):
            raise ReportError(f"{where} coverage: 'hit' counts must be integers")
        _check_pairs(cov.get("pairs"), f"{where} coverage.pairs")
        for j, case in enumerate(c.get("cases", [])):
            _check_case(case, f"{where} cases[{j}]")
        fails = [c["failure"]] if c.get("failure") else []
        for n, f in enumerate(c.get("failures") or []):
            if not isinstance(f, dict):
                raise ReportError(f"{where} failures[{n}]: is {type(f).__name__}: allowed an object")
            _expect(f, "reproducer", (dict, _NONE), f"{where} failures[{n}]", "an object")
            if f.get("failure"):
                fails.append(f["failure"])
        for f in fails:
            _check_case(f, f"{where} failure")
        for k, v in (c.get("reproducer") or {}).items():
            if not isinstance(v, (str, _NONE)):
                raise ReportError(f"{where} reproducer: field {k!r} is {type(v).__name__}: allowed a path")


@dataclass
class Report:
    """A report read back: its campaigns as the CampaignResults that wrote them (their cases
    CaseResults, their verdicts Verdicts) and its header (created, host, versions, merged_from)."""

    campaigns: list = field(default_factory=list)
    header: dict = field(default_factory=dict)

    @classmethod
    def from_dict(cls, doc: dict, where: str = "report") -> "Report":
        """``doc`` (a document ``load_report`` checked, or one a writer made) as a Report; a
        campaign that does not fit the types is a one-line ReportError naming it."""
        from difftest.search.result import CampaignResult  # lazy: loads torch, not on `difftest list`'s path

        campaigns = []
        for i, c in enumerate(doc.get("campaigns") or ()):
            try:
                campaigns.append(CampaignResult.from_dict(c))
            except (TypeError, ValueError, KeyError, AttributeError) as e:
                kernel = c.get("kernel") if isinstance(c, dict) else None
                raise ReportError(
                    f"{where}: campaigns[{i}] ({str(kernel)[:60]}): not a campaign record "
                    f"({type(e).__name__}: {str(e)[:200]}): allowed what `difftest run` "
                    "writes"
                ) from None
        return cls(campaigns, {k: v for k, v in doc.items() if k != "campaigns"})

    @classmethod
    def of(cls, doc) -> "Report":
        """A Report as it is, a document read as one."""
        return doc if isinstance(doc, cls) else cls.from_dict(doc)


def finding_case(record: dict, kernel: str) -> "CaseResult | None":
    """A finding record's shrunk case as the CaseResult that wrote it (None: it has none, or
    one that is not a case: findings are read leniently, an older report's may differ)."""
    from difftest.judge.runner import CaseResult  # lazy: loads torch, not on `difftest list`'s path

    failure = record.get("failure")
    if not isinstance(failure, dict):
        return None
    try:
        return CaseResult.from_dict({"kernel": kernel, **failure})
    except (TypeError, ValueError, KeyError, AttributeError):
        return None


def signed_findings(c: "CampaignResult | None") -> list:
    """A campaign's finding records as (record, Signature, shrunk Problem or None); a finding
    without a readable signature (an older or hand-edited report) is left out."""
    out = []
    for f in c.findings if c is not None else ():
        try:
            sig = Signature.from_dict(f.get("signature"))
        except SignatureError:
            continue
        case = finding_case(f, c.kernel)
        out.append((f, sig, case.problem if case is not None else None))
    return out


def gate_results(campaign: "CampaignResult") -> dict:
    """{(output, gate): {"checked", "failed", "worst_ratio", "first_failing": case}} over the
    campaign's non-skipped cases. ``determinism_info`` (kernels that do not claim
    determinism) counts differing elements in ``failed``'s place under "differing"."""
    out = {}
    for case in campaign.cases:
        if case.status == Status.SKIPPED:
            continue
        for v in case.verdicts:
            key = (v.output, v.gate)
            s = out.setdefault(
                key, {"checked": 0, "failed": 0, "worst_ratio": 0.0, "differing_cases": 0, "first_failing": None}
            )
            s["checked"] += 1
            if not v.passed:
                s["failed"] += 1
                if s["first_failing"] is None:
                    s["first_failing"] = case
            if v.gate in (Gate.BUDGET, Gate.SECOND_REFERENCE):
                s["worst_ratio"] = max(s["worst_ratio"], ratio(v))
            if v.gate in (Gate.DETERMINISM, Gate.DETERMINISM_INFO) and v.numbers.get("differing", 0):
                s["differing_cases"] += 1
    return out
