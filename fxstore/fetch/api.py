"""The Databento historical calls `fxstore fetch` makes, through the `databento` client.

:class:`Api` wraps :class:`databento.Historical`: every call is retried with exponential
backoff on a rate limit (429), a server error (5xx) or a dropped connection (the last only
for calls that buy nothing, since a billed request that was cut off may have been served),
and any failure becomes one :class:`DatabentoApiError` line that names the argument at
fault and never the API key (:func:`redact`).

The key is held by :class:`ApiKey`, whose repr hides it; it is handed to the client and to
nothing else: it is never logged, printed, or written into a file.
"""

from __future__ import annotations

import logging
import re
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Final, TypedDict, TypeVar

from fxstore.errors import FxStoreError, InvalidInputError, SymbolNotFoundError
from fxstore.fetch.request import BATCH_LAYOUT

if TYPE_CHECKING:
    from fxstore.fetch.request import Part

__all__ = [
    "DEFAULT_GATEWAY",
    "Api",
    "ApiKey",
    "DatabentoApiError",
    "RetryPolicy",
    "load_api_key",
    "redact",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_GATEWAY: Final = "https://hist.databento.com"
#: Databento's request fields and the fetch options that set them (to name the one at fault).
_OPTION_OF: Final = (
    ("stype_in", "--stype-in"),
    ("symbol", "--symbol"),
    ("dataset", "--dataset"),
    ("schema", "--schema"),
    ("start", "--start"),
    ("end", "--end"),
)
_KEYS_URL: Final = "https://databento.com/portal/keys"
#: The calls that cost money (Databento's docs: "Calling this method will incur a cost").
_BILLED: Final = frozenset({"batch.submit_job", "timeseries.get_range"})


class DatabentoApiError(FxStoreError):
    """Databento's historical API refused a request, or kept failing after retries."""


@dataclass(frozen=True, slots=True)
class ApiKey:
    """A Databento API key; its repr and str never show it."""

    secret: str = field(repr=False)

    def __str__(self) -> str:
        return "ApiKey(****)"


def load_api_key(env_value: str | None, key_file: Path | None) -> ApiKey:
    """The API key from `key_file` when given, else from `env_value` (DATABENTO_API_KEY).

    Raises
    ------
    InvalidInputError
        No key, an empty key file, or a key file that cannot be read (the message names the
        file, never what it holds).
    """
    if key_file is not None:
        try:
            text = key_file.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as err:
            reason = err.strerror if isinstance(err, OSError) else "not UTF-8 text"
            raise InvalidInputError(
                f"--api-key-file {key_file}: cannot read it ({reason}); give the file that "
                f"holds your Databento API key ({_KEYS_URL})."
            ) from None
        if not text or any(c.isspace() for c in text):
            raise InvalidInputError(
                f"--api-key-file {key_file}: expected one API key on one line; put your "
                f"Databento API key ({_KEYS_URL}) alone in the file."
            )
        return ApiKey(text)
    if env_value is None or not env_value.strip():
        raise InvalidInputError(
            "no Databento API key: set DATABENTO_API_KEY or pass --api-key-file FILE "
            f"(keys are at {_KEYS_URL})."
        )
    return ApiKey(env_value.strip())


def redact(text: str, key: ApiKey) -> str:
    """`text` with every occurrence of the key replaced by ``****``."""
    return text.replace(key.secret, "****") if key.secret else text


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how patiently a failing call is tried again."""

    attempts: int = 5
    """Tries in all, the first included."""
    backoff_s: float = 1.0
    """Wait before the second try; doubled before each next one."""
    max_backoff_s: float = 30.0
    """Longest wait between tries."""

    def wait_s(self, attempt: int, retry_after: str | None) -> float:
        """Seconds to wait after failed try number `attempt` (1-based)."""
        if retry_after is not None and retry_after.strip().isdigit():
            return min(float(retry_after), self.max_backoff_s)
        return min(self.backoff_s * 2.0 ** (attempt - 1), self.max_backoff_s)


class Api:
    """The Databento historical calls of a fetch, retried and with one-line errors.

    Parameters
    ----------
    key
        The API key (kept only inside the databento client).
    gateway
        The historical API's base URL.
    retry
        The retry policy for rate limits, server errors and dropped connections.
    """

    def __init__(
        self, key: ApiKey, gateway: str = DEFAULT_GATEWAY, retry: RetryPolicy | None = None
    ) -> None:
        try:
            import databento
        except ImportError as err:
            raise InvalidInputError(
                "`fxstore fetch` needs the databento client: pip install 'fxstore[fetch]'."
            ) from err
        try:
            self._client = databento.Historical(key=key.secret, gateway=gateway)
        except ValueError as err:
            raise InvalidInputError(
                redact(f"cannot use --gateway {gateway!r} or the API key: {err}", key)
            ) from None
        self._key = key
        self.gateway = gateway
        self.retry = retry or RetryPolicy()

    # The free calls: metadata and symbology, retried on any transient failure.

    def resolve(self, part: Part) -> dict[str, object]:
        """symbology.resolve of the part's symbols to instrument ids, day by day."""
        return self._call(
            "symbology.resolve",
            lambda: self._client.symbology.resolve(
                dataset=part.dataset,
                symbols=list(part.symbols),
                stype_in=part.stype_in,
                stype_out="instrument_id",
                start_date=part.start,
                end_date=part.end_exclusive,
            ),
        )

    def cost_usd(self, part: Part) -> float:
        """metadata.get_cost: US dollars the part costs."""
        call = self._client.metadata.get_cost
        return float(self._call("metadata.get_cost", lambda: call(**_q(part))))

    def billable_bytes(self, part: Part) -> int:
        """metadata.get_billable_size: the bytes the part is billed by."""
        call = self._client.metadata.get_billable_size
        return int(self._call("metadata.get_billable_size", lambda: call(**_q(part))))

    def record_count(self, part: Part) -> int:
        """metadata.get_record_count: records the part holds."""
        call = self._client.metadata.get_record_count
        return int(self._call("metadata.get_record_count", lambda: call(**_q(part))))

    def job_details(self, job_id: str) -> dict[str, object]:
        """batch.get_job_details: the job's state and progress."""
        return self._call(
            "batch.get_job_details", lambda: self._client.batch.get_job_details(job_id)
        )

    def list_files(self, job_id: str) -> list[dict[str, object]]:
        """batch.list_files: the job's files with sizes and hashes."""
        return self._call("batch.list_files", lambda: self._client.batch.list_files(job_id))

    def download_file(self, job_id: str, output_dir: Path, filename: str) -> None:
        """batch.download of one file into ``output_dir/job_id/filename`` (resumed with an
        HTTP Range request when part of it is there already; not billed)."""
        from databento.common.error import BentoWarning

        def download() -> None:
            with warnings.catch_warnings():  # its checksum warning: fxstore checks and acts
                warnings.simplefilter("ignore", BentoWarning)
                self._client.batch.download(
                    job_id=job_id, output_dir=output_dir, filename_to_download=filename
                )

        self._call("batch.download", download, subject=filename)

    # The billed calls: a dropped connection is not retried (it may have been served).

    def submit_job(self, part: Part) -> dict[str, object]:
        """batch.submit_job (billed): one zstd DBN file per UTC day."""
        return self._call(
            "batch.submit_job",
            lambda: self._client.batch.submit_job(
                **_q(part),
                stype_out="instrument_id",
                encoding=BATCH_LAYOUT["encoding"],
                compression=BATCH_LAYOUT["compression"],
                split_duration=BATCH_LAYOUT["split_duration"],
            ),
        )

    def get_range(self, part: Part, path: Path) -> None:
        """timeseries.get_range (billed) streamed into the new file `path` (zstd DBN)."""
        self._call(
            "timeseries.get_range",
            lambda: self._client.timeseries.get_range(**_q(part), path=path),
        )

    def _call(
        self,
        name: str,
        call: Callable[[], T],
        *,
        subject: str | None = None,
    ) -> T:
        from databento.common.error import BentoError, BentoHttpError

        is_billed = name in _BILLED
        attempt = 1
        while True:
            try:
                return call()
            except BentoHttpError as err:
                # A gateway timeout (504) of a billed call may have been served behind it.
                transient = err.http_status == 429 or err.http_status >= 500
                if is_billed and err.http_status == 504:
                    raise self._transport_error(name, err, attempt, subject) from None
                if not transient or attempt >= self.retry.attempts:
                    raise self._http_error(name, err, attempt) from None
                retry_after = err.headers.get("Retry-After") if err.headers else None
            except (BentoError, OSError) as err:  # requests' errors are OSErrors
                if is_billed or attempt >= self.retry.attempts:
                    raise self._transport_error(name, err, attempt, subject) from None
                retry_after = None
            except (ValueError, RuntimeError) as err:  # the client's checks of an answer
                reason = redact(" ".join(str(err).split()), self._key)
                raise DatabentoApiError(
                    f"the databento client refused the answer to {name} ({reason}); look at "
                    "the request in the portal."
                ) from None
            wait = self.retry.wait_s(attempt, retry_after)
            logger.info("%s failed (try %d), retrying in %.1f s", name, attempt, wait)
            _pause(wait)
            attempt += 1

    def _http_error(self, name: str, err: object, attempt: int) -> FxStoreError:
        status = int(getattr(err, "http_status", 0))
        detail = redact(_detail(err), self._key)
        if status == 401:
            return DatabentoApiError(
                f"Databento rejected the API key (401 on {name}): check DATABENTO_API_KEY or "
                f"--api-key-file ({_KEYS_URL})."
            )
        if status in (402, 403):
            return DatabentoApiError(
                f"Databento refused {name} ({status}): {detail}; check your balance and "
                "your plan's datasets in the portal."
            )
        if status == 422:
            option = _option_named(detail)
            cls = SymbolNotFoundError if option == "--symbol" else InvalidInputError
            return cls(f"{option}: Databento refused {name} (422): {detail}.")
        if status == 429 or status >= 500:
            return DatabentoApiError(
                f"Databento's API answered {status} to {name} {attempt} times ({detail}); "
                "nothing was left half-written: run the same command again later."
            )
        return DatabentoApiError(f"Databento refused {name} ({status}): {detail}.")

    def _transport_error(
        self, name: str, err: Exception, attempt: int, subject: str | None
    ) -> DatabentoApiError:
        reason = redact(" ".join(str(err).split()), self._key)[:300]
        if name == "batch.download":
            return DatabentoApiError(
                f"the download of {subject} failed {attempt} times ({reason}); run the same "
                "command again: it resumes where it stopped, at no cost."
            )
        if name in _BILLED:
            return DatabentoApiError(
                f"{name} did not complete ({reason}); it may have been billed: look at the "
                "portal's download center before running again."
            )
        return DatabentoApiError(
            f"cannot reach Databento's API at {self.gateway} ({name}, {attempt} tries: "
            f"{reason}); check the network and --gateway."
        )


class _Query(TypedDict):
    dataset: str
    symbols: list[str]
    schema: str
    stype_in: str
    start: str
    end: str


def _q(part: Part) -> _Query:
    """The query fields every metadata, batch and timeseries call of `part` takes."""
    return {
        "dataset": part.dataset,
        "symbols": list(part.symbols),
        "schema": part.schema,
        "stype_in": part.stype_in,
        "start": part.start.isoformat(),
        "end": part.end_exclusive.isoformat(),
    }


def _detail(err: object) -> str:
    """Databento's message of an HTTP error, on one line."""
    body = getattr(err, "json_body", None)
    detail = body.get("detail") if isinstance(body, Mapping) else None
    if isinstance(detail, Mapping):
        parts = [str(detail.get(k)) for k in ("case", "message") if detail.get(k)]
        text = ": ".join(parts)
    elif detail is not None:
        text = str(detail)
    else:
        text = str(getattr(err, "message", None) or getattr(err, "http_body", "") or "")
    return " ".join(text.split()).rstrip(".") or "no message"


def _option_named(detail: str) -> str:
    """The fetch option a 422 message is about (the first request field it names)."""
    for word in re.findall(r"[a-z_]+", detail.lower()):
        tokens = {word, *(t.removesuffix("s") for t in word.split("_"))}
        for fieldname, option in _OPTION_OF:
            if fieldname in tokens:
                return option
    return "the request"


def _pause(seconds: float) -> None:
    time.sleep(seconds)
