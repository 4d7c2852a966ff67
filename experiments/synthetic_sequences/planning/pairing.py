"""The pairing rules of control families, checked at parse time.

A control family is compared run for run with its main family, so it must be the main family with one factor
changed, its control (scale multiplies the reconstruction term, balance beta, by the mean train token count): the
same model, beta (per term: a run's own, else the family's; on a beta axis, betas its main family trains, on an axis
too, so that each control run pairs with the main family's runs at its beta), warm start, trainer settings, seeds (and hybrid
coefficients, if it runs the hybrid); only terms (and alphas) the main family runs; and at most one control family
of each kind per main family. Data are shared by every family.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from experiments.synthetic_sequences.planning.grid import GridError, family_seeds, run_betas

# what a control family must share with its main family, read with the defaults the grid applies; hybrid
# coefficients too, when the control runs the hybrid term
PAIRED = {"model": None, "warm_start": False}


def family_terms(spec: Mapping) -> set[tuple[str, float]]:
    return {(run["term"], float(run.get("alpha", 0.0))) for run in spec.get("runs") or []}


def term_betas(spec: Mapping) -> dict[tuple[str, float], tuple[list[float], bool]]:
    """{(term, alpha): (the betas its runs train with, whether they are a beta axis)} of a family (grid.run_betas)."""
    return {(run["term"], float(run.get("alpha", 0.0))): run_betas(spec, run) for run in spec.get("runs") or []}


def spelt(betas: list[float], axis: bool) -> str:
    return f"betas {betas!r}" if axis else f"beta {betas[0]!r}"


def beta_difference(control: tuple[list[float], bool], main: tuple[list[float], bool]) -> str | None:
    """Why a control's betas of one term do not pair with its main family's, or None where they do: the same beta
    off an axis; on one, betas the main family's axis holds."""
    (betas, axis), (main_betas, main_axis) = control, main
    if axis != main_axis:
        return f"{spelt(betas, axis)} vs {spelt(main_betas, main_axis)}"
    if axis and not set(betas) <= set(main_betas):
        return f"betas {sorted(set(betas) - set(main_betas))} not among {main_betas!r}"
    if not axis and betas != main_betas:
        return f"{betas[0]!r} vs {main_betas[0]!r}"
    return None


def differences(control: Mapping, main: Mapping, seeds: tuple[list[int], list[int]]) -> list[str]:
    """'field (control's value vs main's)' for every shared field that differs."""
    shared = PAIRED | ({"hybrid": {}} if "hybrid" in {term for term, _ in family_terms(control)} else {})
    found = [
        f"{name} ({control.get(name, default)!r} vs {main.get(name, default)!r})"
        for name, default in shared.items()
        if control.get(name, default) != main.get(name, default)
    ]
    main_betas = term_betas(main)
    for (term, alpha), betas in sorted(term_betas(control).items()):
        if (term, alpha) in main_betas and (why := beta_difference(betas, main_betas[term, alpha])):
            found.append(f"beta of {term} alpha={alpha:g} ({why})")
    settings = (control.get("settings") or {}, main.get("settings") or {})
    for name in sorted(set(settings[0]) | set(settings[1])):
        if settings[0].get(name, "unset") != settings[1].get(name, "unset"):
            found.append(f"settings.{name} ({settings[0].get(name, 'unset')!r} vs {settings[1].get(name, 'unset')!r})")
    if set(seeds[0]) != set(seeds[1]):  # runs pair by seed value, in any order
        found.append(f"seeds ({seeds[0]} vs {seeds[1]})")
    return found


def check_pairings(families: Mapping[str, Mapping], seeds: int | Sequence[int] | None = None) -> None:
    """Raise GridError for a control family that is not its main family with one factor changed (module docstring)."""
    kinds: dict[tuple[str, str], str] = {}
    for name, spec in families.items():
        main_name = spec.get("control_of")
        if main_name is None:
            continue
        main, kind, where = families[main_name], spec["controls"], f"families.{name}"
        if (main_name, kind) in kinds:
            raise GridError(f"{where}: {main_name} already has a {kind} control family ({kinds[main_name, kind]}); keep one")
        kinds[main_name, kind] = name
        found = differences(spec, main, (family_seeds(spec, seeds, name), family_seeds(main, seeds, main_name)))
        if found:
            raise GridError(
                f"{where}: a {kind} control must equal its main family {main_name} in everything but its control; "
                "it differs in " + "; ".join(found)
            )
        extra = sorted(family_terms(spec) - family_terms(main))
        if extra:
            listed = ", ".join(f"{term} alpha={alpha:g}" for term, alpha in extra)
            raise GridError(f"{where}.runs: {listed} not run by its main family {main_name}; a control pairs only with runs it has")
