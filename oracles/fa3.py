"""FA3 as a second reference.

A kernel under test must stay within its error budget against the float64 truth AND
within ``k`` x FA3's own error against that truth (the runner's ``second_reference``
option; gates.check_second_reference applies the budget and reports both numbers). This
module decides when FA3 can serve and runs it:

- ``second_reference_for(kernel_name)``: "fa3", or None when the kernel under test is FA3
  itself or FA3 cannot run here (with the reason), so a campaign can set
  ``RunConfig.second_reference`` from it;
- ``fa3_reference(inputs)``: FA3's Outputs for these inputs, or None with a note saying why
  the case falls back to the truth alone (outside FA3's capability, unavailable, or FA3
  raised).
"""

from difftest.execute import adapter as registry
from difftest.model.inputs import Inputs
from difftest.model.outputs import Outputs

NAME = "fa3"


def second_reference_for(kernel_name: str) -> tuple[str | None, str]:
    """(registry name of the second reference or None, a note for the report)."""
    if kernel_name == NAME or kernel_name.startswith(NAME + "-"):
        return None, "kernel under test is FA3: no second reference"
    fa3 = registry.get(NAME)
    why = fa3.available()
    if why:
        return None, f"FA3 unavailable ({why}): judged against the float64 truth only"
    return NAME, f"second reference: FA3 ({fa3.description})"


def fa3_reference(inputs: Inputs) -> tuple[Outputs | None, str]:
    """FA3's outputs for ``inputs`` (on FA3's device), or None and why not."""
    fa3 = registry.get(NAME)
    why = fa3.capability.excludes(inputs.problem) or fa3.available()
    if why:
        return None, f"FA3 cannot run this case ({why}): float64 truth only"
    try:
        out = fa3.run(inputs.to(fa3.capability.device))
    except Exception as e:  # noqa: BLE001 - a failing second reference is a note, not a failure
        return None, f"FA3 raised {type(e).__name__}: {e}: float64 truth only"
    return out.to(inputs.device), "FA3 second reference"
