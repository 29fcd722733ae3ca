"""Getting data: plan, price and download from Databento's historical API into the store.

``fxstore fetch`` in three calls: :func:`plan_fetch` (free metadata and symbology calls: what
a :class:`FetchRequest` costs, holds and resolves to, and what the store has already),
then, once the user agreed, :func:`fetch` (batch.submit_job or timeseries.get_range, the
only billed calls; downloads with resume and sha256 checks into
``<store>/raw/<DATASET>/<job-id>/``, the batch layout `fxstore ingest` reads).

- :mod:`~fxstore.fetch.request`: the validated request and its per-schema parts;
- :mod:`~fxstore.fetch.api`: the Databento client behind retries and one-line errors; the key;
- :mod:`~fxstore.fetch.plan`: the plan shown before buying;
- :mod:`~fxstore.fetch.download`: buying, polling, downloading, checking, committing;
- :mod:`~fxstore.fetch.layout`: the raw folders and the fetch manifest.

The `databento` package is imported only when an :class:`Api` is made.
"""

from __future__ import annotations

from fxstore.fetch.api import Api, ApiKey, DatabentoApiError, RetryPolicy, load_api_key
from fxstore.fetch.download import ChecksumError, FetchedPart, FetchResult, fetch
from fxstore.fetch.layout import FETCH_MANIFEST, job_dir, raw_dir
from fxstore.fetch.plan import FetchPlan, PartPlan, plan_fetch
from fxstore.fetch.request import FetchRequest, Part

__all__ = [
    "FETCH_MANIFEST",
    "Api",
    "ApiKey",
    "ChecksumError",
    "DatabentoApiError",
    "FetchPlan",
    "FetchRequest",
    "FetchResult",
    "FetchedPart",
    "Part",
    "PartPlan",
    "RetryPolicy",
    "fetch",
    "job_dir",
    "load_api_key",
    "plan_fetch",
    "raw_dir",
]
