"""An S3 bucket (AWS or any S3-compatible server) as the home of a store: objects and commits.

The one place fxstore talks to object storage. It lists, reads and writes objects under a
``s3://bucket/prefix`` and commits a manifest with a *conditional* PUT: ``If-None-Match: *``
when the manifest did not exist when it was read, ``If-Match: <ETag>`` when it did, so of any
number of concurrent writers exactly one commits and the others get a
:class:`CommitConflictError` (S3 answers 412 Precondition Failed, or 409 while another
conditional write of the same key is in flight). Data objects are written with
``If-None-Match: *``: an object is never replaced, so a committed manifest's files keep the
bytes it recorded.

Credentials come from boto3's usual chain (``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``,
``AWS_PROFILE``, instance roles); the endpoint of an S3-compatible server from ``endpoint``
(``--s3-endpoint``) or ``AWS_ENDPOINT_URL``. Every failure a user can cause (no credentials,
no such bucket, access denied, an endpoint that cannot be reached) is a one-line
:class:`~fxstore.errors.StoreAccessError` saying what to do.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from fxstore.errors import FxStoreError, InvalidInputError, StoreAccessError

__all__ = ["CommitConflictError", "ObjectInfo", "S3Bucket", "StoreUrl", "md5_hex", "parse_url"]

#: What to install when boto3 is missing.
INSTALL: Final = "install the S3 extra: pip install 'fxstore[s3]'"
_DENIED: Final = {
    "AccessDenied",
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "403",
    "AllAccessDisabled",
}
_CONFLICT: Final = {"PreconditionFailed", "412", "ConditionalRequestConflict", "409"}


class CommitConflictError(FxStoreError):
    """Another writer committed (or wrote) the same object first: nothing of this run was
    committed; re-run to build on what it committed."""


@dataclass(frozen=True, slots=True)
class StoreUrl:
    """``s3://bucket/prefix``: where a store lives in object storage."""

    bucket: str
    #: The key prefix of the store root, without leading or trailing '/' ("" for the bucket).
    prefix: str

    def key(self, rel: str) -> str:
        """The object key of the store-relative path `rel` (``bars/ES.FUT/...``)."""
        return f"{self.prefix}/{rel}" if self.prefix else rel

    def url(self, rel: str = "") -> str:
        """The ``s3://`` URL of `rel` (the root when empty)."""
        key = self.key(rel) if rel else self.prefix
        return f"s3://{self.bucket}/{key}".rstrip("/")


def parse_url(value: str) -> StoreUrl:
    """The StoreUrl of ``s3://bucket[/prefix]``.

    Raises
    ------
    InvalidInputError
        Not an s3:// URL (another fsspec scheme is not available yet), or no bucket.
    """
    scheme, sep, rest = value.partition("://")
    if not sep or scheme.lower() not in ("s3", "s3a"):
        raise InvalidInputError(
            f"--store {value!r}: only local paths and s3:// URLs (AWS or an S3-compatible server "
            "via --s3-endpoint) are available as a store; other fsspec schemes are not yet."
        )
    bucket, _, prefix = rest.partition("/")
    if not bucket:
        raise InvalidInputError(f"--store {value!r}: no bucket; use s3://BUCKET/PREFIX.")
    parts = [p for p in prefix.split("/") if p]
    if any(p in (".", "..") for p in parts):
        raise InvalidInputError(f"--store {value!r}: '.' and '..' are not allowed in the prefix.")
    return StoreUrl(bucket, "/".join(parts))


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    """One object as a listing returns it."""

    size: int
    #: The ETag without quotes: the MD5 of the bytes for a single-part PUT.
    etag: str
    #: Last modified, ns since the epoch.
    mtime_ns: int


def md5_hex(path: Path, block: int = 1 << 20) -> str:
    """Hex MD5 of a local file: what S3 gives as the ETag of its single-part upload."""
    digest = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as fh:
        while data := fh.read(block):
            digest.update(data)
    return digest.hexdigest()


class S3Bucket:
    """The objects of a store root in an S3 bucket (boto3's client underneath)."""

    def __init__(self, url: StoreUrl, endpoint: str | None = None) -> None:
        try:
            import boto3
            from botocore.config import Config
        except ImportError as err:
            raise InvalidInputError(f"{url.url()}: an S3 store needs boto3; {INSTALL}.") from err
        self.url = url
        self.endpoint = endpoint or os.environ.get("AWS_ENDPOINT_URL") or None
        config = Config(
            retries={"max_attempts": 3, "mode": "standard"},
            connect_timeout=5,
            read_timeout=60,
        )
        session = boto3.session.Session()
        #: boto3's S3 client (boto3 ships no types of its own: typed as Any here).
        self.client: Any = session.client("s3", endpoint_url=self.endpoint, config=config)

    @contextlib.contextmanager
    def errors(self, rel: str, action: str) -> Iterator[None]:
        """Turn boto3's exceptions raised inside into one-line fxstore errors about `rel`."""
        from botocore import exceptions as bex

        where = self.url.url(rel)
        at = f" at {self.endpoint}" if self.endpoint else ""
        try:
            yield
        except bex.NoCredentialsError as err:
            raise StoreAccessError(
                f"cannot {action} {where}: no AWS credentials found; set AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY (or AWS_PROFILE) and re-run."
            ) from err
        except (bex.EndpointConnectionError, bex.ConnectTimeoutError) as err:
            raise StoreAccessError(
                f"cannot {action} {where}: the S3 endpoint {self.endpoint or 'of AWS'} cannot be "
                "reached; check --s3-endpoint (or AWS_ENDPOINT_URL) and the network, then re-run."
            ) from err
        except bex.ClientError as err:
            code = str(err.response.get("Error", {}).get("Code", ""))
            status = str(err.response.get("ResponseMetadata", {}).get("HTTPStatusCode", ""))
            if (
                code in _CONFLICT
                or status in ("412", "409")
                or (
                    action == "commit" and code == "NoSuchKey"  # If-Match on a deleted manifest
                )
            ):
                raise CommitConflictError(
                    f"another writer wrote {where} first (S3 refused the conditional write); "
                    "nothing of this run was committed: re-run to build on what it committed."
                ) from err
            if code == "NoSuchBucket":
                raise StoreAccessError(
                    f"cannot {action} {where}: bucket {self.url.bucket!r} does not exist{at}; "
                    "create it or fix --store."
                ) from err
            if code in _DENIED or status == "403":
                raise StoreAccessError(
                    f"cannot {action} {where}: access denied ({code or status}){at}; check the "
                    "credentials and the bucket policy (s3:GetObject, s3:PutObject, "
                    "s3:ListBucket), then re-run."
                ) from err
            message = err.response.get("Error", {}).get("Message", "") or str(err)
            raise StoreAccessError(
                f"cannot {action} {where}: S3 said {code or status}: {message}; check --store "
                "and re-run."
            ) from err
        except bex.BotoCoreError as err:
            raise StoreAccessError(f"cannot {action} {where}: {err}; re-run.") from err

    def list(self, rel_prefix: str = "") -> dict[str, ObjectInfo]:
        """Every object below `rel_prefix` of the store root: store-relative path → info."""
        base = self.url.key(rel_prefix) if rel_prefix else self.url.prefix
        base = f"{base}/" if base and not base.endswith("/") else base
        strip = len(f"{self.url.prefix}/") if self.url.prefix else 0
        found: dict[str, ObjectInfo] = {}
        with self.errors(rel_prefix, "list"):
            pages = self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.url.bucket, Prefix=base
            )
            for page in pages:
                for obj in page.get("Contents", []):
                    found[obj["Key"][strip:]] = ObjectInfo(
                        size=int(obj["Size"]),
                        etag=str(obj["ETag"]).strip('"'),
                        mtime_ns=int(obj["LastModified"].timestamp() * 1e9),
                    )
        return found

    def get(self, rel: str) -> tuple[bytes, str] | None:
        """The bytes and ETag of object `rel`, None when there is none."""
        with self.errors(rel, "read"):
            try:
                reply = self.client.get_object(Bucket=self.url.bucket, Key=self.url.key(rel))
            except self.client.exceptions.NoSuchKey:
                return None
            return reply["Body"].read(), str(reply["ETag"]).strip('"')

    def head(self, rel: str) -> ObjectInfo | None:
        """Size, ETag and time of object `rel`, None when there is none."""
        from botocore.exceptions import ClientError

        with self.errors(rel, "read"):
            try:
                reply = self.client.head_object(Bucket=self.url.bucket, Key=self.url.key(rel))
            except ClientError as err:
                if str(err.response.get("Error", {}).get("Code")) in ("404", "NoSuchKey"):
                    return None
                raise
            return ObjectInfo(
                size=int(reply["ContentLength"]),
                etag=str(reply["ETag"]).strip('"'),
                mtime_ns=int(reply["LastModified"].timestamp() * 1e9),
            )

    def read_head(self, rel: str, n_bytes: int) -> bytes:
        """The first `n_bytes` of object `rel` (fewer at its end): one ranged GET."""
        with self.errors(rel, "read"):
            reply = self.client.get_object(
                Bucket=self.url.bucket, Key=self.url.key(rel), Range=f"bytes=0-{n_bytes - 1}"
            )
            data: bytes = reply["Body"].read()
        return data

    def download(self, rel: str, dest: Path) -> None:
        """Write object `rel` into the local file `dest` (which the caller names and checks)."""
        with self.errors(rel, "download"), open(dest, "wb") as fh:
            reply = self.client.get_object(Bucket=self.url.bucket, Key=self.url.key(rel))
            for chunk in reply["Body"].iter_chunks(1 << 20):
                fh.write(chunk)

    def put(
        self,
        rel: str,
        data: bytes,
        *,
        if_none_match: bool = False,
        if_match: str | None = None,
    ) -> str:
        """Write object `rel`; return its ETag.

        `if_none_match`: only if no such object exists; `if_match`: only if its ETag is that.
        Either failing raises :class:`CommitConflictError`.
        """
        kwargs: dict[str, str] = {}
        if if_none_match:
            kwargs["IfNoneMatch"] = "*"
        if if_match is not None:
            kwargs["IfMatch"] = f'"{if_match}"'
        with self.errors(rel, "commit" if kwargs else "write"):
            reply = self.client.put_object(
                Bucket=self.url.bucket, Key=self.url.key(rel), Body=data, **kwargs
            )
        return str(reply["ETag"]).strip('"')

    def put_file(self, rel: str, path: Path, *, if_none_match: bool = False) -> str:
        """Upload the local file `path` as object `rel` in one PUT; return its ETag.

        S3 checks and stores the object's SHA-256 (``x-amz-checksum-sha256``), so that
        :meth:`stored_sha256` can tell it without reading the object back.
        """
        with self.errors(rel, "write"), open(path, "rb") as fh:
            reply = self.client.put_object(
                Bucket=self.url.bucket,
                Key=self.url.key(rel),
                Body=fh,
                ChecksumAlgorithm="SHA256",
                **({"IfNoneMatch": "*"} if if_none_match else {}),
            )
        return str(reply["ETag"]).strip('"')

    def copy(self, source: str, rel: str, *, source_etag: str | None = None) -> str:
        """Copy object `source` to `rel` inside the bucket (a server-side copy: no byte
        travels through this machine), only if no object `rel` exists and, with
        `source_etag`, only if `source` still has that ETag; return the new object's ETag.
        S3 stores the copy's SHA-256 as for an upload (:meth:`stored_sha256`).

        Raises
        ------
        CommitConflictError
            `source` changed, or `rel` exists.
        """
        condition = {} if source_etag is None else {"CopySourceIfMatch": f'"{source_etag}"'}
        with self.errors(rel, "write" if source_etag is None else "commit"):
            reply = self.client.copy_object(
                Bucket=self.url.bucket,
                Key=self.url.key(rel),
                CopySource={"Bucket": self.url.bucket, "Key": self.url.key(source)},
                IfNoneMatch="*",
                ChecksumAlgorithm="SHA256",
                **condition,
            )
        return str(reply["CopyObjectResult"]["ETag"]).strip('"')

    def stored_sha256(self, rel: str) -> str | None:
        """The hex SHA-256 S3 stored for object `rel` at upload (a HEAD request), None when
        it stored none (uploaded without it, or by another tool) or there is no object."""
        from botocore.exceptions import ClientError

        with self.errors(rel, "read"):
            try:
                reply = self.client.head_object(
                    Bucket=self.url.bucket, Key=self.url.key(rel), ChecksumMode="ENABLED"
                )
            except ClientError as err:
                if str(err.response.get("Error", {}).get("Code")) in ("404", "NoSuchKey"):
                    return None
                raise
        stored = reply.get("ChecksumSHA256")
        if not isinstance(stored, str) or reply.get("ChecksumType", "FULL_OBJECT") != "FULL_OBJECT":
            return None  # none, or a multipart upload's checksum of checksums
        return base64.b64decode(stored).hex()

    def read_sha256(self, rel: str) -> str:
        """The hex SHA-256 of object `rel`'s bytes, streamed (nothing is written locally)."""
        digest = hashlib.sha256()
        with self.errors(rel, "read"):
            reply = self.client.get_object(Bucket=self.url.bucket, Key=self.url.key(rel))
            for chunk in reply["Body"].iter_chunks(1 << 20):
                digest.update(chunk)
        return digest.hexdigest()

    def delete(self, rels: Sequence[str]) -> None:
        """Delete the objects `rels` (those missing are no error)."""
        for start in range(0, len(rels), 1000):
            batch = [{"Key": self.url.key(r)} for r in rels[start : start + 1000]]
            with self.errors(rels[start], "delete"):
                self.client.delete_objects(Bucket=self.url.bucket, Delete={"Objects": batch})

    def check(self) -> None:
        """Fail early with one line if the bucket cannot be listed (credentials, bucket,
        access, endpoint)."""
        with self.errors("", "open"):
            self.client.list_objects_v2(Bucket=self.url.bucket, Prefix=self.url.prefix, MaxKeys=1)
