"""File uploads in three steps (what slack_sdk's ``files_upload_v2`` does) and the shared file."""

from __future__ import annotations

import json
import struct
import urllib.error
import urllib.request
import zlib

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackRequestError

from emulator.slack import SlackEmulator, SlackEmulatorClient
from tests.emulator.slack.receiver import Receiver


def test_files_upload_v2_shares_the_file_in_the_thread(
    web: WebClient, control: SlackEmulatorClient, emulator: SlackEmulator, receiver: Receiver
) -> None:
    parent = web.chat_postMessage(channel="C_INCIDENT", text="parent")["ts"]
    content = "line one\n" + "é" * 5000
    done = web.files_upload_v2(
        channel="C_INCIDENT",
        thread_ts=parent,
        content=content,
        filename="answer.md",
        title="The answer",
        initial_comment="Too long for messages: attached.",
    )
    assert done["ok"] and done["file"]["title"] == "The answer"
    reply = control.thread("incident", parent)[-1]
    assert reply["text"] == "Too long for messages: attached."
    [shared] = reply["files"]
    assert (shared["name"], shared["size"]) == ("answer.md", len(content.encode()))
    with urllib.request.urlopen(shared["url_private"], timeout=5) as response:
        assert response.read().decode() == content
        assert response.headers["Content-Disposition"] == "attachment"
    assert [f["id"] for f in control.files()] == [shared["id"]]
    methods = [c["method"] for c in control.calls()]
    assert methods[-2:] == ["files.getUploadURLExternal", "files.completeUploadExternal"]
    events = [json.loads(r.body) for r in receiver.wait_for(2)]  # the parent, then the share
    assert any(e["event"].get("files") for e in events)  # the share arrives as a message event


def upload_url(web: WebClient, length: int) -> tuple[str, str]:
    answer = web.files_getUploadURLExternal(filename="a.txt", length=length)
    return str(answer["upload_url"]), str(answer["file_id"])


def post_bytes(url: str, data: bytes) -> int:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=data, method="POST"), timeout=5) as r:
            return int(r.status)
    except urllib.error.HTTPError as error:
        return error.code


def test_an_upload_url_takes_exactly_the_announced_bytes_once(web: WebClient) -> None:
    url, _ = upload_url(web, 3)
    assert post_bytes(url, b"toolong") == 400
    assert post_bytes(url, b"abc") == 200
    assert post_bytes(url, b"abc") == 404  # used
    assert post_bytes(url.rsplit("/", 1)[0] + "/forged-token", b"abc") == 404


def test_completing_before_the_bytes_arrived_is_file_not_found(web: WebClient) -> None:
    _, file_id = upload_url(web, 3)
    with pytest.raises(SlackApiError) as info:
        web.files_completeUploadExternal(files=[{"id": file_id, "title": "t"}], channel_id="C_INCIDENT")
    assert info.value.response["error"] == "file_not_found"
    with pytest.raises(SlackApiError) as info:
        web.files_completeUploadExternal(files=[{"id": "F_FORGED", "title": "t"}])
    assert info.value.response["error"] == "file_not_found"


def test_sharing_where_the_bot_is_not_is_not_in_channel(web: WebClient) -> None:
    url, file_id = upload_url(web, 1)
    assert post_bytes(url, b"x") == 200
    with pytest.raises(SlackApiError) as info:
        web.files_completeUploadExternal(files=[{"id": file_id, "title": "t"}], channel_id="C_RANDOM")
    assert info.value.response["error"] == "not_in_channel"


def test_a_length_of_zero_or_a_missing_filename_is_invalid_arguments(web: WebClient) -> None:
    for kwargs in ({"filename": "a", "length": 0}, {"filename": "", "length": 3}):
        with pytest.raises(SlackApiError) as info:
            web.files_getUploadURLExternal(**kwargs)  # type: ignore[arg-type]
        assert info.value.response["error"] == "invalid_arguments"


def test_sdk_reports_a_refused_upload(web: WebClient, emulator: SlackEmulator) -> None:
    class Shrinking(WebClient):  # announces one length, sends another
        def files_getUploadURLExternal(self, **kwargs: object) -> object:  # type: ignore[override]
            kwargs["length"] = int(str(kwargs["length"])) + 1
            return super().files_getUploadURLExternal(**kwargs)  # type: ignore[arg-type]

    liar = Shrinking(token=web.token, base_url=emulator.api_url)
    with pytest.raises((SlackRequestError, urllib.error.HTTPError)):  # the SDK's urlopen raises on 400
        liar.files_upload_v2(channel="C_INCIDENT", content="abc", filename="a.txt")


def tiny_png(width: int = 3, height: int = 2) -> bytes:
    """A real PNG (white pixels), built by hand: the emulator knows it by its bytes."""
    raw = b"".join(b"\x00" + b"\xff\xff\xff" * width for _ in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


def test_alt_text_longer_than_slacks_limit_is_refused(web: WebClient, control: SlackEmulatorClient) -> None:
    with pytest.raises(SlackApiError) as info:
        web.files_getUploadURLExternal(filename="chart.png", length=3, alt_txt="a" * 1001)
    assert info.value.response["error"] == "alt_txt_too_large"
    assert web.files_getUploadURLExternal(filename="chart.png", length=3, alt_txt="a" * 1000)["ok"]


def test_a_png_is_shared_as_an_image_with_its_alt_text(web: WebClient, control: SlackEmulatorClient) -> None:
    parent = web.chat_postMessage(channel="C_INCIDENT", text="parent")["ts"]
    image = tiny_png()
    web.files_upload_v2(
        channel="C_INCIDENT",
        thread_ts=parent,
        file=image,
        filename="chart-E1.png",
        title="E1",
        alt_txt="A chart.",
    )
    [shared] = control.thread("incident", parent)[-1]["files"]
    assert (shared["mimetype"], shared["filetype"], shared["mode"]) == ("image/png", "png", "hosted")
    assert (shared["original_w"], shared["original_h"], shared["alt_txt"]) == (3, 2, "A chart.")
    assert "preview" not in shared
    with urllib.request.urlopen(shared["url_private"], timeout=5) as response:
        assert response.headers["Content-Type"] == "image/png" and response.read() == image


def test_a_file_is_what_its_bytes_are_not_what_its_name_says(
    web: WebClient, control: SlackEmulatorClient
) -> None:
    parent = web.chat_postMessage(channel="C_INCIDENT", text="parent")["ts"]
    fake = b"\x89PNG\r\n\x1a\n<script>alert(1)</script>"  # a PNG signature, no header chunk
    web.files_upload_v2(channel="C_INCIDENT", thread_ts=parent, file=fake, filename="chart.png")
    [shared] = control.thread("incident", parent)[-1]["files"]
    assert shared["mimetype"] == "text/plain" and "original_w" not in shared
    with urllib.request.urlopen(shared["url_private"], timeout=5) as response:
        assert response.headers["Content-Type"].startswith("text/plain")
        assert response.headers["X-Content-Type-Options"] == "nosniff"
