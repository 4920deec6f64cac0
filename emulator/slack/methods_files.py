"""File uploads, Slack's way since files.upload was retired: three steps (``files_upload_v2``).

1. ``files.getUploadURLExternal`` (``filename``, ``length`` in bytes) answers an ``upload_url``
   and a ``file_id`` (docs.slack.dev/reference/methods/files.getUploadURLExternal);
2. the bytes are POSTed to that URL (here ``/upload/v1/<token>`` on the emulator), which
   answers 200 ``OK - <length>``;
3. ``files.completeUploadExternal`` (``files=[{"id", "title"}]``, optional ``channel_id``,
   ``thread_ts``, ``initial_comment``) finishes it and shares the file: a message carrying
   ``files`` appears in the channel or thread
   (docs.slack.dev/reference/methods/files.completeUploadExternal).

Slack's own limits: ``alt_txt`` (the image's description for screen readers) is at most
``ALT_TEXT_LIMIT`` characters (``alt_txt_too_large``), a file at most 1 GB. Stricter than Slack
where Slack is vague: an upload whose byte count differs from ``length`` is refused (400), a
file completed before its bytes arrived is ``file_not_found``, an upload URL is good once, and
sharing needs the bot in the channel (``not_in_channel``). Both methods need ``files:write``
(``emulator.slack.scopes``).

A shared file is what its bytes are, never what its name says: a PNG (signature and header
chunk) is an image (``mimetype`` ``image/png``, its size in pixels, no text preview; the page
shows it with its alt text); anything else is a text snippet with a preview.
"""

from __future__ import annotations

import secrets
import struct
import time
from typing import Any

from emulator.slack.events import events_for_new_message
from emulator.slack.ids import random_id
from emulator.slack.methods_chat import bot_channel
from emulator.slack.state import Workspace
from emulator.slack.webapi import ApiResult, Handler, Params, SlackError

MAX_FILE_BYTES = 1024**3  # Slack's limit for one file: 1 GB
ALT_TEXT_LIMIT = 1000  # files.getUploadURLExternal: "longer than the limit of 1000 character"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
PREVIEW_CHARS = 500
UPLOAD_TTL = 600.0  # an upload URL not used within this many seconds is void


def get_upload_url(ws: Workspace, p: Params) -> ApiResult:
    """``files.getUploadURLExternal``: a one-time URL for ``length`` bytes of ``filename``."""
    filename = p.required("filename")
    length = p.number("length", 0)
    if length <= 0:
        raise SlackError("invalid_arguments", response_metadata={"messages": ["[ERROR] invalid 'length'"]})
    if length > MAX_FILE_BYTES:
        raise SlackError("file_too_large")
    if len(p.text("alt_txt")) > ALT_TEXT_LIMIT:
        raise SlackError("alt_txt_too_large")
    file_id, token = random_id("F"), secrets.token_urlsafe(18)
    ws.uploads[file_id] = {
        "filename": filename,
        "length": length,
        "alt_txt": p.text("alt_txt"),
        "snippet_type": p.text("snippet_type"),
        "token": token,
        "data": None,
        "created": time.monotonic(),
    }
    return ApiResult({"ok": True, "upload_url": f"{ws.base_url}/upload/v1/{token}", "file_id": file_id})


def receive_upload(ws: Workspace, token: str, data: bytes) -> tuple[int, str]:
    """The POST of a file's bytes to its upload URL: ``(status, body)`` as Slack's edge answers."""
    with ws.lock:
        found = next((u for u in ws.uploads.values() if secrets.compare_digest(u["token"], token)), None)
        if found is None or found["data"] is not None:
            return 404, "invalid upload url"
        if time.monotonic() - found["created"] > UPLOAD_TTL:
            return 404, "upload url expired"
        if len(data) != found["length"]:
            return 400, f"expected {found['length']} bytes, got {len(data)}"
        found["data"] = data
    return 200, f"OK - {len(data)}"


def png_size(data: bytes) -> tuple[int, int] | None:
    """The width and height of a PNG (its signature, then its IHDR chunk), else ``None``."""
    if len(data) < 24 or not data.startswith(PNG_SIGNATURE) or data[12:16] != b"IHDR":
        return None
    width, height = struct.unpack(">II", data[16:24])
    return (width, height) if width and height else None


def _file_object(ws: Workspace, file_id: str, upload: dict[str, Any], title: str) -> dict[str, Any]:
    data: bytes = upload["data"]
    name = str(upload["filename"])
    shared: dict[str, Any] = {
        "id": file_id,
        "created": int(time.time()),
        "name": name,
        "title": title or name,
        "user": ws.config.bot_user_id,
        "size": len(data),
        "is_external": False,
        "url_private": f"{ws.base_url}/files/{file_id}/{name}",
        "alt_txt": upload["alt_txt"] or None,
    }
    size = png_size(data)
    if size is not None:  # an image, as Slack shows it: no text preview, its size in pixels
        url = shared["url_private"]
        return {**shared, "mimetype": "image/png", "filetype": "png", "pretty_type": "PNG", "mode": "hosted",
                "original_w": size[0], "original_h": size[1], "thumb_360": url, "thumb_480": url}  # fmt: skip
    return {
        **shared,
        "mimetype": "text/plain",
        "filetype": upload["snippet_type"] or "text",
        "mode": "snippet",
        "preview": data[:PREVIEW_CHARS].decode("utf-8", errors="replace"),
    }


def complete_upload(ws: Workspace, p: Params) -> ApiResult:
    """``files.completeUploadExternal``: finish uploads and share them in a channel or thread."""
    raw = p.json("files")
    if not isinstance(raw, list) or not raw or not all(isinstance(f, dict) and f.get("id") for f in raw):
        raise SlackError("invalid_arguments", response_metadata={"messages": ["[ERROR] invalid 'files'"]})
    uploads = []
    for item in raw:
        upload = ws.uploads.get(str(item["id"]))
        if upload is None or upload["data"] is None:
            raise SlackError("file_not_found")
        uploads.append((str(item["id"]), upload, str(item.get("title") or "")))
    channel_ref = p.text("channel_id") or p.text("channels").split(",")[0]
    channel = bot_channel(ws, channel_ref) if channel_ref else None
    thread_ts = p.text("thread_ts") or None
    if thread_ts and (channel is None or ws.message(channel.id, thread_ts) is None):
        raise SlackError("invalid_thread_ts")
    files = []
    for file_id, upload, title in uploads:
        del ws.uploads[file_id]
        shared = _file_object(ws, file_id, upload, title)
        ws.files[file_id] = {**shared, "data": upload["data"]}
        files.append(shared)
    envelopes: list[dict[str, Any]] = []
    if channel is not None:
        msg = ws.add_message(
            channel.id, ws.config.bot_user_id, p.text("initial_comment"), None, thread_ts=thread_ts
        )
        msg.files = files
        envelopes = events_for_new_message(ws, msg)
    answer = [{"id": f["id"], "title": f["title"], "name": f["name"]} for f in files]
    return ApiResult({"ok": True, "files": answer}, envelopes=envelopes)


def file_content(ws: Workspace, file_id: str) -> tuple[bytes, str] | None:
    """A shared file's bytes (``url_private``) and their type, ``None`` when there is no such file."""
    with ws.lock:
        found = ws.files.get(file_id)
        return None if found is None else (bytes(found["data"]), str(found["mimetype"]))


def file_listing(ws: Workspace) -> list[dict[str, Any]]:
    """Every shared file (without its bytes), for the control API."""
    with ws.lock:
        return [{k: v for k, v in f.items() if k != "data"} for f in ws.files.values()]


HANDLERS: dict[str, Handler] = {
    "files.getUploadURLExternal": get_upload_url,
    "files.completeUploadExternal": complete_upload,
}
