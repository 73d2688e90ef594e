"""A progress bar for long replays, on stderr (tqdm); silent when stderr is not a terminal."""

from __future__ import annotations

from tqdm import tqdm

# Seconds before the bar shows: short replays stay quiet.
DELAY_S = 1.0


def progress_bar(total: int, desc: str, enabled: bool = True) -> tqdm:
    """A bar counting started GPRs; ``enabled=False`` (or a non-terminal stderr) shows nothing."""
    return tqdm(
        total=total,
        desc=desc,
        unit="GPR",
        disable=None if enabled else True,
        delay=DELAY_S,
        mininterval=0.5,
        leave=False,
        dynamic_ncols=True,
    )
