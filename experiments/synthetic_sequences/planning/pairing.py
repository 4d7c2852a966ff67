"""The pairing rules of control families, checked at parse time.

A control family is compared run for run with its main family, so it must be the main family with one factor
changed, its control (scale multiplies the reconstruction term, balance beta, by the mean train token count): the
same model, beta (per term: a run's own, else the family's), warm start, trainer settings, seeds (and hybrid
coefficients, if it runs the hybrid); only terms (and alphas) the main family runs; and at most one control family
of each kind per main family. Data are shared by every family.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from experiments.synthetic_sequences.planning.grid import GridError, family_seeds, run_beta

# what a control family must share with its main family, read with the defaults the grid applies; hybrid
# coefficients too, when the control runs the hybrid term
PAIRED = {"model": None, "warm_start": False}


def family_terms(spec: Mapping) -> set[tuple[str, float]]:
    return {(run["term"], float(run.get("alpha", 0.0))) for run in spec.get("runs") or []}


def term_betas(spec: Mapping) -> dict[tuple[str, float], float]:
    """{(term, alpha): the beta its runs train with} of a family (a run's own beta, else the family's)."""
    return {(run["term"], float(run.get("alpha", 0.0))): run_beta(spec, run) for run in spec.get("runs") or []}


def differences(control: Mapping, main: Mapping, seeds: tuple[list[int], list[int]]) -> list[str]:
    """'field (control's value vs main's)' for every shared field that differs."""
    shared = PAIRED | ({"hybrid": {}} if "hybrid" in {term for term, _ in family_terms(control)} else {})
    found = [
        f"{name} ({control.get(name, default)!r} vs {main.get(name, default)!r})"
        for name, default in shared.items()
        if control.get(name, default) != main.get(name, default)
    ]
    main_betas = term_betas(main)
    for (term, alpha), beta in sorted(term_betas(control).items()):
        if (term, alpha) in main_betas and beta != main_betas[term, alpha]:
            found.append(f"beta of {term} alpha={alpha:g} ({beta!r} vs {main_betas[term, alpha]!r})")
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
