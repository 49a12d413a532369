"""The example GPU workflow (.github/workflows/difftest-gpu.yml, not run here) is valid
YAML and wires what it claims: both sides sharded over every shard with one seed, run
with the commands and flags this difftest has, merged, gated with JUnit and HTML, and
the gate's files uploaded."""

import re
import shlex
from pathlib import Path

import pytest

from difftest.commands.cli import build_parser

WORKFLOW = Path(__file__).resolve().parent.parent / ".github" / "workflows" / "difftest-gpu.yml"


def _commands(doc) -> list[list[str]]:
    """Every `python3 -m difftest ...` invocation in the workflow's run steps, as argv."""
    out = []
    for job in doc["jobs"].values():
        for step in job["steps"]:
            script = step.get("run", "").replace("\\\n", " ")
            for line in script.splitlines():
                m = re.search(r"python3 -m difftest (.*)", line)
                if m:
                    out.append(shlex.split(m.group(1)))
    return out


def test_workflow_parses_and_is_wired():
    yaml = pytest.importorskip("yaml", reason="pyyaml not installed: cannot parse the workflow")
    doc = yaml.safe_load(WORKFLOW.read_text())
    on = doc.get("on", doc.get(True))  # YAML 1.1 reads a bare `on` key as True
    assert "pull_request" in on
    camp, gate = doc["jobs"]["campaign"], doc["jobs"]["gate"]
    matrix = camp["strategy"]["matrix"]
    assert matrix["side"] == ["baseline", "candidate"]
    assert matrix["shard"] == list(range(int(doc["env"]["SHARDS"])))
    assert gate["needs"] == "campaign"
    cmds = _commands(doc)
    names = [c[0] for c in cmds]
    assert names.count("run") == 1 and names.count("merge") == 2 and names.count("gate") == 1
    env = {"$PROFILE": doc["env"]["PROFILE"], "$KERNELS": "", "$SEED": doc["env"]["SEED"], "$SHARDS": "2"}
    parser_args = []
    for argv in cmds:
        argv = [a for a in argv if a != "$KERNELS"]
        argv = [
            re.sub(r"\$\{\{ matrix\.(\w+) \}\}", lambda m: {"shard": "1", "side": "candidate"}[m.group(1)], a)
            for a in argv
        ]
        for k, v in env.items():
            argv = [a.replace(k, v) for a in argv]
        argv = [a for a in argv if "*" not in a] + (["x.json"] if argv[0] == "merge" else [])
        parser_args.append(build_parser(argv).parse_args(argv))  # every flag exists
    run = parser_args[names.index("run")]
    assert run.seed == int(doc["env"]["SEED"]) and run.shard == (1, 2) and run.device == "cuda"
    g = parser_args[names.index("gate")]
    assert g.junit == "junit.xml" and g.html == "gate.html"
    uploads = [s for s in gate["steps"] if s.get("uses", "").startswith("actions/upload-artifact")]
    assert uploads and uploads[0]["if"] == "always()"
    assert {"junit.xml", "gate.html"} <= set(uploads[0]["with"]["path"].split())
