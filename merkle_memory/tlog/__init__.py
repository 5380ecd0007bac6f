"""Proofs a third party can check: C2SP tiles, witnesses and offline proof bundles.

* ``tiles`` / ``client``: a log's Merkle tree published as static C2SP tlog-tiles files
  (``write_tiles``), and a client that proves and verifies inclusion and consistency from those
  files alone, read from a folder or over HTTP (``TileClient``, ``FolderTiles``, ``HttpTiles``);
* ``witness``: a C2SP tlog-witness (``Witness`` over SQLite, ``WitnessServer`` on
  ``http.server``) that cosigns only consistent checkpoints, and its client;
* ``bundle``: offline proof bundles, c2sp.org/tlog-proof@v1 (``ProofBundle``);
* ``s3``: a tiled log under ``s3://bucket/prefix`` of an S3-compatible object store
  (``S3Tiles``: what ``write_tiles`` publishes through and ``TileClient`` reads from; boto3,
  the extra ``s3``, imported on first use);
* ``publish``: all three for a ledger (``publish_tiles``, ``witness_ledger``,
  ``ledger_bundle``, ``verify_ledger_bundle``).

Quick start::

    from merkle_memory.tlog import FolderTiles, TileClient
    client = TileClient.open(FolderTiles("public/log"), [log_verifier])
    proof = client.inclusion_proof(41)   # verified against the signed checkpoint
"""

from .bundle import ProofBundle
from .client import FolderTiles, HttpTiles, TileClient, TileFetcher
from .publish import ledger_bundle, publish_tiles, verify_ledger_bundle, witness_ledger
from .s3 import S3Tiles
from .tiles import FolderSink, Tile, TileSink, TileWriteReport, write_tiles
from .witness import Witness, WitnessClient, WitnessServer

__all__ = [
    "FolderSink",
    "FolderTiles",
    "HttpTiles",
    "ProofBundle",
    "S3Tiles",
    "Tile",
    "TileClient",
    "TileFetcher",
    "TileSink",
    "TileWriteReport",
    "Witness",
    "WitnessClient",
    "WitnessServer",
    "ledger_bundle",
    "publish_tiles",
    "verify_ledger_bundle",
    "witness_ledger",
    "write_tiles",
]
