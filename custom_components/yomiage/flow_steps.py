"""What Yomiage's flows share (the setup flow, an entry's options): background work behind a
progress screen, and a failed download's or check's form error."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from homeassistant.config_entries import ConfigFlowResult
from homeassistant.core import callback
from homeassistant.data_entry_flow import FlowHandler

from .bundle_check import BundleCheckError
from .engine.hub.download import FetchError, Progress

_LOGGER = logging.getLogger(__name__)

_PROGRESS_STEP = 0.01  # report download progress in 1 % steps, not per network read


class BackgroundSteps(FlowHandler[Any, ConfigFlowResult, str]):
    """A flow whose steps may run a job in the background (a download, an install)."""

    def __init__(self) -> None:
        super().__init__()
        self._job: asyncio.Task[str] | None = None  # a background step's; returns the next step
        self._reported_progress = 0.0
        self._closed = threading.Event()  # the flow has ended: a job's thread stops

    async def _async_progress(
        self,
        step_id: str,
        job: Callable[[], Coroutine[Any, Any, str]],
        placeholders: Mapping[str, str] | None = None,
        progress_action: str | None = None,
    ) -> ConfigFlowResult:
        """Every background step: start ``job`` once, show ``step_id``'s progress screen (its
        text: ``progress_action``'s, else the step's own) while it runs, then go on to the step
        id the job returns: the next step, or the one that says why it failed (the job catches
        its own failures). Closing the flow cancels the job."""
        if self._job is None:
            self._reported_progress = 0.0
            self._job = self.hass.async_create_task(job())
        if not self._job.done():
            return self.async_show_progress(
                step_id=step_id,
                progress_action=progress_action or step_id,
                progress_task=self._job,
                description_placeholders=placeholders,
            )
        job_done, self._job = self._job, None
        return self.async_show_progress_done(next_step_id=job_done.result())

    def _progress_from_thread(self, progress: Progress) -> None:
        """A job's thread reports progress: hop to the event loop. Once the flow is closed,
        raising stops the thread, which Home Assistant cannot cancel: it would go on holding the
        download folder (the next try: "busy"); its partial files stay for that try."""
        if self._closed.is_set():
            raise FlowClosedError
        self.hass.loop.call_soon_threadsafe(self._report_progress, progress.fraction)

    @callback
    def _report_progress(self, fraction: float) -> None:
        # Home Assistant 2025.4 has no progress bar for flows yet; later versions do.
        update = getattr(self, "async_update_progress", None)
        if update is not None and fraction - self._reported_progress >= _PROGRESS_STEP:
            self._reported_progress = fraction
            update(fraction)

    @callback
    def async_remove(self) -> None:
        """The flow has ended, or was closed while a job ran (its task is cancelled)."""
        self._closed.set()


class FlowClosedError(Exception):
    """Raised in a job's thread to stop it: the flow that waited for it is closed."""


def describe_failure(err: FetchError | BundleCheckError, placeholders: dict[str, str]) -> str:
    """The error key for a failed listing, download or check, its English detail logged; the
    placeholders its text names (the repository, a file) are the caller's or the check's."""
    _LOGGER.warning("%s", err)
    if isinstance(err, FetchError):
        return err.translation_key
    placeholders.update(err.placeholders)
    return err.key


def megabytes(size: int) -> str:
    return f"{size / 1e6:,.0f} MB" if size >= 1e6 else f"{size / 1e6:.2f} MB"
