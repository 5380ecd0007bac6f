"""A tiled log in S3-compatible object storage: ``s3://bucket/prefix`` (issue 19).

``S3Tiles`` is both ends of a log kept under a bucket prefix: the ``TileSink`` that
``write_tiles`` / ``publish_tiles`` publish through, and the ``TileFetcher`` a ``TileClient``
verifies from. The objects are the files a folder publish writes, under the same paths below the
prefix (``<prefix>/checkpoint``, ``<prefix>/tile/0/x001/234``, ``<prefix>/tile/entries/...``),
with the same bytes.

It speaks S3 through boto3 (the extra ``s3``: ``pip install 'merkle_memory[s3]'``), imported on
first use; the request signing, retries and the credential chain are boto3's (the environment's
``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` / ``AWS_SESSION_TOKEN``, ``AWS_PROFILE`` and
the shared config files, an instance role; ``AWS_ENDPOINT_URL`` / ``AWS_REGION`` when no endpoint
or region is given).

What the store is trusted for: nothing. ``write_tiles`` orders the writes (every tile and
bundle PUT acknowledged before the checkpoint's PUT) and never relies on a conditional write
(many S3-compatible servers ignore ``If-None-Match``): the ledger is the only sequencer, and a
re-run after a crash PUTs the same immutable bytes again. Each PUT carries ``Content-MD5``, so
the server refuses a body damaged in transit. A reader checks every object against the signed
checkpoint (``TileClient``).
"""

from __future__ import annotations

import base64
import hashlib
import math
from typing import Any

from ..errors import TileError, TileNotFoundError
from .client import _check_path
from .tiles import CHECKPOINT_PATH, MAX_RESOURCE_SIZE

__all__ = ["ATTEMPTS", "DEFAULT_TIMEOUT", "S3Tiles", "is_s3_url", "split_s3_url"]

SCHEME = "s3://"
"""The scheme of an object-store location."""

TILE_CACHE_CONTROL = "public, max-age=31536000, immutable"
"""``Cache-Control`` of tiles and bundles: they never change."""

CHECKPOINT_CACHE_CONTROL = "no-cache"
"""``Cache-Control`` of the checkpoint: it is replaced as the log grows."""

DEFAULT_TIMEOUT = 10.0
"""Seconds to wait for the endpoint to accept a connection, and then for each read of its
answer, unless told otherwise (``S3Tiles(timeout=...)``, the CLI's ``--timeout``)."""

ATTEMPTS = 3
"""How many times one request is tried (boto3's ``standard`` retry mode: the first try and two
retries, with its jittered backoff of at most 1 s, then 2 s). A dead endpoint (no connection,
or no answer) therefore fails after about ``ATTEMPTS * timeout + 3`` seconds: about half a
minute with the default timeout."""

_MISSING = frozenset({"404", "NoSuchKey", "NotFound"})


def is_s3_url(value: object) -> bool:
    """Whether ``value`` is a ``str`` naming an object-store location (``s3://...``)."""
    return isinstance(value, str) and value.startswith(SCHEME)


def split_s3_url(url: str) -> tuple[str, str]:
    """Split ``s3://bucket/prefix`` into the bucket and the prefix (no slash at either end;
    ``""`` for none).

    Raises:
        TileError: not an ``s3://`` URL, no bucket, or a prefix with an empty, ``.`` or
            ``..`` segment, a backslash or a NUL.
    """
    if not is_s3_url(url):
        raise TileError(f"an object-store location is s3://bucket/prefix, not {url!r}")
    bucket, _, prefix = url[len(SCHEME) :].partition("/")
    prefix = prefix.strip("/")
    if not bucket or any(c in bucket for c in "?#\\\x00"):
        raise TileError(f"{url!r}: no valid bucket name (s3://bucket/prefix)")
    if prefix and (
        any(part in ("", ".", "..") for part in prefix.split("/"))
        or "\\" in prefix
        or "\x00" in prefix
    ):
        raise TileError(f"{url!r}: a prefix of empty, '.' or '..' segments is not a location")
    return bucket, prefix


def _boto3() -> Any:
    try:
        import boto3
    except ImportError as exc:
        raise TileError(
            f"S3 support needs boto3: pip install 'merkle_memory[s3]' ({exc})"
        ) from None
    return boto3


class S3Tiles:
    """A tiled log under ``s3://bucket/prefix``: a ``TileSink`` to publish it and a
    ``TileFetcher`` to read it (see the module docstring).

    Not for use by several threads at once (it keeps no state but boto3's client).
    """

    def __init__(
        self,
        url: str,
        *,
        endpoint: str | None = None,
        region: str | None = None,
        client: Any = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        """Use the log under ``url``.

        Args:
            url: ``s3://bucket/prefix`` (the prefix may be empty: the bucket's root).
            endpoint: the S3 endpoint URL (``http://127.0.0.1:9000``, an S3-compatible
                server); ``None``: boto3's default (``AWS_ENDPOINT_URL``, or AWS). With an
                endpoint, requests use path-style addressing (``endpoint/bucket/key``), which
                every S3-compatible server understands.
            region: the signing region; ``None``: boto3's default (``AWS_REGION``, the
                profile), else ``us-east-1``.
            client: a boto3 S3 client to use instead of making one (``endpoint`` and
                ``region`` must then be ``None``; its own timeouts apply).
            timeout: seconds, a finite number > 0: boto3's ``connect_timeout`` and
                ``read_timeout`` (the wait for a connection, then for each read of an
                answer); each request is tried ``ATTEMPTS`` times.

        Raises:
            TileError: a bad ``url``, ``endpoint``, ``region`` or ``timeout``, or boto3 is not
                installed (the message names the extra ``s3``).
        """
        self.bucket, self.prefix = split_s3_url(url)
        self.endpoint = endpoint
        if (
            not isinstance(timeout, int | float)
            or isinstance(timeout, bool)
            or not math.isfinite(timeout)
            or timeout <= 0
        ):
            raise TileError(f"an S3 timeout is a number of seconds > 0, not {timeout!r}")
        self.timeout = float(timeout)
        if client is not None:
            if endpoint is not None or region is not None:
                raise TileError("give either a boto3 client or endpoint/region, not both")
            self._client = client
            config = getattr(getattr(client, "meta", None), "config", None)
            given = getattr(config, "read_timeout", None)
            if isinstance(given, int | float) and not isinstance(given, bool):
                self.timeout = float(given)
            return
        if endpoint is not None and (
            not isinstance(endpoint, str) or not endpoint.startswith(("http://", "https://"))
        ):
            raise TileError(f"an S3 endpoint is an http:// or https:// URL, not {endpoint!r}")
        boto3 = _boto3()
        from botocore.config import Config

        config = Config(
            s3={"addressing_style": "path"} if endpoint else {},
            retries={"mode": "standard", "max_attempts": ATTEMPTS},
            connect_timeout=self.timeout,
            read_timeout=self.timeout,
        )
        session = boto3.session.Session()
        if region is None and session.region_name is None:
            region = "us-east-1"
        try:
            self._client = session.client(
                "s3", endpoint_url=endpoint, region_name=region, config=config
            )
        except Exception as exc:  # botocore raises ValueError or its own errors here
            raise TileError(f"cannot use S3 endpoint {endpoint!r}: {exc}") from None

    def __repr__(self) -> str:
        return f"S3Tiles({self.label!r})"

    @property
    def label(self) -> str:
        """``s3://bucket/prefix``."""
        return f"{SCHEME}{self.bucket}/{self.prefix}" if self.prefix else f"{SCHEME}{self.bucket}"

    def key(self, path: str) -> str:
        """The object key of ``path`` (below the prefix).

        Raises:
            TileError: ``path`` is not a resource path (absolute, ``..``, empty segments).
        """
        relative = str(_check_path(path))
        return f"{self.prefix}/{relative}" if self.prefix else relative

    def _error(self, exc: Exception, doing: str, path: str) -> TileError:
        from botocore.exceptions import (
            ClientError,
            ConnectTimeoutError,
            EndpointConnectionError,
            NoCredentialsError,
            ReadTimeoutError,
        )

        where = f"{self.label}/{path}"
        endpoint = str(getattr(self._client.meta, "endpoint_url", None) or self.endpoint)
        if isinstance(exc, ConnectTimeoutError | ReadTimeoutError):
            return TileError(
                f"{where}: cannot {doing}: no answer from the S3 endpoint {endpoint} within "
                f"{self.timeout:g} s ({ATTEMPTS} attempts)",
                path=path,
            )
        if isinstance(exc, EndpointConnectionError):
            return TileError(
                f"{where}: cannot {doing}: cannot connect to the S3 endpoint {endpoint} "
                f"({ATTEMPTS} attempts)",
                path=path,
            )
        if isinstance(exc, NoCredentialsError):
            return TileError(
                f"{where}: no S3 credentials (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
                "or AWS_PROFILE)",
                path=path,
            )
        if isinstance(exc, ClientError):
            error = exc.response.get("Error", {})
            code = str(error.get("Code", "?"))
            message = str(error.get("Message", "") or "")
            if code == "NoSuchBucket":
                return TileError(f"{where}: cannot {doing}: no bucket {self.bucket!r}", path=path)
            return TileError(
                f"{where}: cannot {doing}: {code}" + (f" ({message})" if message else ""),
                path=path,
            )
        return TileError(f"{where}: cannot {doing}: {exc}", path=path)

    # --- TileSink ----------------------------------------------------------------------------

    def read(self, path: str) -> bytes | None:
        """GET the object of ``path``; ``None`` when there is none.

        Raises:
            TileError: any other failure (no bucket, denied, unreachable), or an object larger
                than any tile or bundle.
        """
        from botocore.exceptions import BotoCoreError, ClientError

        key = self.key(path)
        try:
            answer = self._client.get_object(Bucket=self.bucket, Key=key)
            with answer["Body"] as body:
                data: bytes = body.read(MAX_RESOURCE_SIZE + 1)
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            if code in _MISSING:
                return None
            raise self._error(exc, "read", path) from None
        except BotoCoreError as exc:
            raise self._error(exc, "read", path) from None
        if len(data) > MAX_RESOURCE_SIZE:
            raise TileError(f"{self.label}/{path}: larger than any tile or bundle", path=path)
        return data

    def names(self, prefix: str) -> frozenset[str]:
        """List the paths below the log's prefix that start with ``prefix`` (one request per
        1,000 objects): ``write_tiles`` then GETs only the objects that exist.

        Raises:
            TileError: the listing failed (no bucket, denied, unreachable).
        """
        from botocore.exceptions import BotoCoreError, ClientError

        base = f"{self.prefix}/" if self.prefix else ""
        found: set[str] = set()
        try:
            pages = self._client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=base + prefix
            )
            for page in pages:
                for item in page.get("Contents", ()):
                    found.add(str(item["Key"])[len(base) :])
        except (ClientError, BotoCoreError) as exc:
            raise self._error(exc, "list", prefix) from None
        return frozenset(found)

    def _put(self, path: str, data: bytes, content_type: str, cache: str) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        digest = base64.b64encode(hashlib.md5(data, usedforsecurity=False).digest()).decode()
        try:
            self._client.put_object(
                Bucket=self.bucket,
                Key=self.key(path),
                Body=data,
                ContentMD5=digest,
                ContentType=content_type,
                CacheControl=cache,
            )
        except (ClientError, BotoCoreError) as exc:
            raise self._error(exc, "write", path) from None

    def put(self, path: str, data: bytes) -> None:
        """PUT an immutable tile or bundle (returns once the store acknowledged it).

        No ``If-None-Match``: ``write_tiles`` read the key first and found none, and the
        ledger, not the store, decides what each key holds (the same bytes on every run).

        Raises:
            TileError: the store refused or cannot be reached.
        """
        self._put(path, bytes(data), "application/octet-stream", TILE_CACHE_CONTROL)

    def flush(self) -> None:
        """Nothing to do: each ``put`` returned only once its PUT was acknowledged."""

    def put_checkpoint(self, data: bytes) -> None:
        """PUT the checkpoint (an S3 PUT replaces an object atomically).

        Raises:
            TileError: the store refused or cannot be reached.
        """
        self._put(
            CHECKPOINT_PATH, bytes(data), "text/plain; charset=utf-8", CHECKPOINT_CACHE_CONTROL
        )

    # --- TileFetcher -------------------------------------------------------------------------

    def fetch(self, path: str) -> bytes:
        """Return the object of ``path`` (for ``TileClient``).

        Raises:
            TileNotFoundError: no such object.
            TileError: it cannot be fetched (see ``read``).
        """
        data = self.read(path)
        if data is None:
            raise TileNotFoundError(f"{self.label}/{path}: not found", path=path)
        return data
