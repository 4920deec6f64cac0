// The emulator's page: one channel with its threads, a composer that posts as the chosen person,
// clickable Block Kit buttons, modals, reactions, ephemeral messages and the bot's status.
// It reads everything from /control and refreshes on each server-sent event from /stream.
"use strict";

(() => {
  const $ = (sel) => document.querySelector(sel);
  const el = BlockKit.el;
  const app = {
    state: null,
    channel: null,
    user: null,
    drafts: {},      // thread_ts -> text typed into that thread's reply box
    openReplies: {}, // ts -> true when the reply box of a message without replies is open
    viewHash: null,
    view: "channel", // or "home": the app's Home tab for the acting person
    stick: true,     // keep the newest message in view (until the person scrolls up)
  };

  async function api(method, path, body) {
    const response = await fetch(`/control${path}`, {
      method,
      headers: { "Content-Type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const data = await response.json();
    if (!response.ok) throw new Error(data.error || response.statusText);
    return data;
  }

  function toast(message) {
    const node = $("#toast");
    node.textContent = message;
    node.hidden = false;
    clearTimeout(toast.timer);
    toast.timer = setTimeout(() => { node.hidden = true; }, 5000);
  }

  function userName(id) {
    const user = app.state.users.find((u) => u.id === id);
    return user ? user.name : id;
  }

  function formatTime(ts) {
    return new Date(parseFloat(ts) * 1000).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
  }

  // --- setup ----------------------------------------------------------------------------------

  async function loadState() {
    app.state = await api("GET", "/state");
    const s = app.state;
    SlackText.setNames({
      users: Object.fromEntries(s.users.map((u) => [u.id, u.name])),
      channels: Object.fromEntries(s.channels.map((c) => [c.id, c.name])),
      groups: Object.fromEntries(s.usergroups.map((g) => [g.id, g.handle])),
    });
    $("#team-name").textContent = s.team.name;
    $("#events-url").textContent = s.events_url ? `events → ${s.events_url}` : "events URL not set";
    const picker = $("#user-picker");
    const chosen = app.user || picker.value;
    picker.replaceChildren(...s.users.filter((u) => !u.is_bot && !u.deleted).map((u) => el("option", { value: u.id }, `@${SlackText.esc(u.name)}`)));
    app.user = s.users.some((u) => u.id === chosen) ? chosen : picker.options[0] && picker.options[0].value;
    picker.value = app.user;
    const wanted = new URLSearchParams(location.search).get("channel");
    if (!app.channel) {
      const first = s.channels.find((c) => c.name === wanted || c.id === wanted) || s.channels.find((c) => c.bot_member) || s.channels[0];
      app.channel = first.id;
    }
    renderChannels();
    renderPageButtons();
  }

  // Buttons of whoever runs the emulator (the demo's "Fire an alert"): not Slack's.
  function renderPageButtons() {
    const buttons = app.state.page_buttons || [];
    $("#page-buttons-heading").hidden = buttons.length === 0;
    $("#page-buttons").replaceChildren(...buttons.map((b) => {
      const button = el("button", { type: "button", class: "page-button", title: b.title, "data-button-id": b.id }, SlackText.esc(b.label));
      button.addEventListener("click", async () => {
        button.disabled = true;
        try {
          const answer = await api("POST", `/page_buttons/${encodeURIComponent(b.id)}`, { user: app.user });
          toast(answer.text);
        } catch (err) {
          toast(`${b.label} failed: ${err.message}`);
        } finally {
          button.disabled = false;
        }
      });
      return button;
    }));
  }

  function renderChannels() {
    const list = $("#channel-list");
    list.replaceChildren(...app.state.channels.map((c) => {
      const item = el("li", { class: c.id === app.channel ? "channel active" : "channel", "data-channel-id": c.id, "data-channel-name": c.name },
        `# ${SlackText.esc(c.name)}${c.bot_member ? "" : ' <span class="muted">(no bot)</span>'}`);
      item.addEventListener("click", () => { app.channel = c.id; showChannel(); });
      return item;
    }));
    $("#home-link").className = app.view === "home" ? "channel active" : "channel";
    if (app.view === "home") for (const item of list.children) item.className = "channel";
    const channel = app.state.channels.find((c) => c.id === app.channel);
    $("#channel-name").textContent = app.view === "home" ? `Home · @${app.state.bot.name}` : `#${channel.name}`;
    $("#channel-name").dataset.channelId = channel.id;
    $("#bot-membership").hidden = app.view === "home";
    $("#bot-membership").textContent = channel.bot_member ? `@${app.state.bot.name} is in this channel` : `@${app.state.bot.name} is not in this channel`;
    $("#composer-input").placeholder = `Message #${channel.name} as @${userName(app.user)} — type @${app.state.bot.name} to mention the bot`;
  }

  // --- messages -------------------------------------------------------------------------------

  function reactions(msg) {
    const row = el("div", { class: "reactions" });
    for (const r of msg.reactions || []) {
      const title = r.users.map(userName).join(", ");
      row.append(el("span", { class: "reaction", "data-name": r.name, title }, `${SlackText.emoji(r.name)} <span class="count">${r.count}</span>`));
    }
    return row;
  }

  function messageNode(msg, isReply) {
    const classes = ["message"];
    if (isReply) classes.push("reply");
    if (msg.bot_id) classes.push("from-bot");
    if (msg.ephemeral) classes.push("ephemeral");
    if (msg.deleted) classes.push("deleted");
    const node = el("div", {
      class: classes.join(" "), "data-ts": msg.ts, "data-user": msg.user,
      "data-thread-ts": msg.thread_ts || "", "data-subtype": msg.subtype || "",
    });
    const head = el("div", { class: "message-head" });
    const ownApp = msg.bot_id === app.state.bot.bot_id;
    const author = msg.bot_id ? (ownApp ? app.state.bot.name : msg.username || msg.bot_id) : userName(msg.user);
    head.append(el("span", { class: "author" }, SlackText.esc(author)));
    if (msg.bot_id) head.append(el("span", { class: "badge" }, "APP"));
    head.append(el("span", { class: "time muted" }, formatTime(msg.ts)));
    if (msg.edited) head.append(el("span", { class: "edited muted", title: `${msg.history.length} earlier version(s)` }, "(edited)"));
    if (msg.subtype === "thread_broadcast" && !isReply) head.append(el("span", { class: "muted" }, "replied to a thread"));
    if (msg.ephemeral) head.append(el("span", { class: "ephemeral-label" }, "Only visible to you"));
    node.append(head);
    const ctx = { onButton: (block, element, button) => onButton(msg, block, element, button) };
    if (msg.stream) {  // chat.startStream: its tasks above the streamed text
      if (msg.stream.state === "streaming") head.append(el("span", { class: "badge streaming" }, "streaming…"));
      node.append(BlockKit.tasks(msg.stream));
    }
    // Slack shows blocks when there are any; text is then only the notification fallback.
    if (msg.blocks && msg.blocks.length) {
      const blocks = BlockKit.render(msg.blocks, ctx);
      blocks.classList.add("message-text");
      node.append(blocks);
    } else {
      node.append(el("div", { class: "message-text" }, SlackText.mrkdwn(msg.text)));
    }
    if (msg.files && msg.files.length) node.append(filesNode(msg));
    node.append(reactions(msg));
    return node;
  }

  // Files shared with files.completeUploadExternal: name (a download link), size, and the image
  // (with its alt text) or the text preview. Only a same-origin file is ever loaded.
  function filesNode(msg) {
    const box = el("div", { class: "files" });
    for (const f of msg.files) {
      const card = el("div", { class: "file", "data-file-id": f.id });
      const url = new URL(f.url_private || "", location.href);
      const sameOrigin = url.origin === location.origin;  // never a link the bot chose elsewhere
      card.append(el(sameOrigin ? "a" : "span", sameOrigin ? { class: "file-name", href: url.href, download: f.name } : { class: "file-name" },
        SlackText.esc(f.title || f.name)));
      card.append(el("span", { class: "file-size muted" }, ` ${SlackText.esc(String(Math.ceil((f.size || 0) / 1024)))} KB`));
      if (f.mimetype === "image/png" && sameOrigin) {
        card.append(el("img", { class: "file-image", src: url.href, alt: String(f.alt_txt || ""), title: String(f.title || f.name || "") }));
      } else {
        card.append(el("pre", { class: "file-preview" }, SlackText.esc(f.preview || "")));
      }
      box.append(card);
    }
    return box;
  }

  function replyBox(threadTs) {
    const form = el("form", { class: "thread-composer", "data-thread-ts": threadTs });
    const input = el("textarea", { class: "thread-input", rows: "1", placeholder: "Reply…", "data-thread-ts": threadTs });
    input.value = app.drafts[threadTs] || "";
    input.addEventListener("input", () => { app.drafts[threadTs] = input.value; });
    input.addEventListener("keydown", (e) => { if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); form.requestSubmit(); } });
    const broadcast = el("label", { class: "broadcast muted" });
    broadcast.append(el("input", { type: "checkbox", class: "thread-broadcast" }), document.createTextNode(" also send to channel"));
    const send = el("button", { type: "submit", class: "thread-send" }, "Reply");
    form.append(input, broadcast, send);
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      const text = input.value;
      if (!text.trim()) return;
      app.drafts[threadTs] = "";
      input.value = "";
      await post(text, threadTs, form.querySelector(".thread-broadcast").checked);
    });
    return form;
  }

  function threadNode(msg) {
    const thread = el("div", { class: "thread", "data-thread-ts": msg.ts });
    for (const reply of msg.replies) thread.append(messageNode(reply, true));
    if (msg.status) {
      thread.append(el("div", { class: "assistant-status", "data-thread-ts": msg.ts },
        `<span class="dots"></span> ${SlackText.esc(app.state.bot.name)} ${SlackText.esc(msg.status.status)}`));
    }
    if (msg.replies.length || app.openReplies[msg.ts]) thread.append(replyBox(msg.ts));
    return thread;
  }

  function renderMessages(messages) {
    const box = $("#messages");
    const focused = document.activeElement;
    const focusTs = focused && focused.classList.contains("thread-input") ? focused.dataset.threadTs : null;
    // Follow new messages while the newest is in view (or the person just posted); a person who
    // scrolled up to read keeps their place.
    const atBottom = app.stick || box.scrollHeight - box.scrollTop - box.clientHeight < 40;
    const nodes = [];
    for (const msg of messages) {
      const item = el("article", { class: "entry", "data-ts": msg.ts });
      item.append(messageNode(msg, false));
      if (msg.subtype !== "thread_broadcast" && !msg.ephemeral) {
        if (!msg.replies.length && !app.openReplies[msg.ts]) {
          const toggle = el("button", { type: "button", class: "reply-toggle link", "data-ts": msg.ts }, "Reply in thread");
          toggle.addEventListener("click", () => { app.openReplies[msg.ts] = true; refresh(); });
          item.append(toggle);
        }
        item.append(threadNode(msg));
      }
      nodes.push(item);
    }
    box.replaceChildren(...nodes);
    if (focusTs) {
      const input = box.querySelector(`.thread-input[data-thread-ts="${focusTs}"]`);
      if (input) { input.focus(); input.setSelectionRange(input.value.length, input.value.length); }
    }
    if (atBottom) box.scrollTop = box.scrollHeight;
    app.stick = false;
  }

  // --- the App Home tab -------------------------------------------------------------------------

  function showChannel() {
    app.view = "channel";
    app.stick = true;
    $("#home").hidden = true;
    $("#messages").hidden = false;
    renderChannels();
    refresh().catch((err) => toast(err.message));
  }

  async function openHome() {
    app.view = "home";
    $("#messages").hidden = true;
    $("#home").hidden = false;
    renderChannels();
    await refreshHome();
    await api("POST", `/home/${encodeURIComponent(app.user)}`); // Slack sends app_home_opened
  }

  async function refreshHome() {
    if (app.view !== "home") return;
    const { view } = await api("GET", `/home/${encodeURIComponent(app.user)}`);
    const box = $("#home");
    box.dataset.user = app.user;
    if (!view) {
      box.replaceChildren(el("div", { class: "home-empty" }, `@${SlackText.esc(app.state.bot.name)} has not published a Home tab for you yet.`));
      return;
    }
    const blocks = BlockKit.render(view.blocks, { onButton: () => toast("Buttons on the Home tab are not emulated.") });
    blocks.classList.add("message-text", "home-view");
    box.replaceChildren(blocks);
  }

  async function refresh() {
    if (!app.state) return;
    const data = await api("GET", `/channels/${encodeURIComponent(app.channel)}/messages?viewer=${encodeURIComponent(app.user)}`);
    renderMessages(data.messages);
    await refreshModal();
  }

  // --- acting ---------------------------------------------------------------------------------

  async function post(text, threadTs, broadcast) {
    try {
      await api("POST", "/messages", { channel: app.channel, user: app.user, text, thread_ts: threadTs || null, reply_broadcast: !!broadcast });
    } catch (err) {
      toast(`Could not post: ${err.message}`);
    }
  }

  function confirmFirst(confirm) {
    if (!confirm) return Promise.resolve(true);
    $("#confirm-title").innerHTML = SlackText.plain(confirm.title && confirm.title.text);
    $("#confirm-text").innerHTML = BlockKit.text(confirm.text);
    $("#confirm-yes").innerHTML = SlackText.plain((confirm.confirm && confirm.confirm.text) || "Confirm");
    $("#confirm-no").innerHTML = SlackText.plain((confirm.deny && confirm.deny.text) || "Cancel");
    $("#confirm-yes").className = confirm.style === "danger" ? "danger" : "primary";
    $("#confirm-backdrop").hidden = false;
    return new Promise((resolve) => {
      const done = (answer) => { $("#confirm-backdrop").hidden = true; resolve(answer); };
      $("#confirm-yes").onclick = () => done(true);
      $("#confirm-no").onclick = () => done(false);
    });
  }

  async function onButton(msg, block, element, button) {
    if (!(await confirmFirst(element.confirm))) return;
    if (element.url) window.open(element.url, "_blank", "noopener");
    button.disabled = true;
    try {
      const result = await api("POST", "/actions", {
        message_ts: msg.ts, channel: msg.channel, user: app.user, action_id: element.action_id ?? null, value: element.value ?? null,
      });
      if (!result.ok) toast(`${app.state.bot.name} did not handle the click (${result.outcome || result.status}).`);
    } catch (err) {
      toast(`Click failed: ${err.message}`);
    } finally {
      button.disabled = false;
    }
  }

  // --- modals ---------------------------------------------------------------------------------

  async function refreshModal() {
    const { views } = await api("GET", `/views?user=${encodeURIComponent(app.user)}`);
    const view = views[views.length - 1];
    const backdrop = $("#modal-backdrop");
    if (!view) { backdrop.hidden = true; app.viewHash = null; return; }
    const form = $("#modal");
    if (view.hash !== app.viewHash || form.dataset.viewId !== view.id) {
      app.viewHash = view.hash;
      form.dataset.viewId = view.id;
      form.dataset.callbackId = view.callback_id;
      $("#modal-title").innerHTML = SlackText.plain(view.title && view.title.text);
      $("#modal-body").replaceChildren(BlockKit.render(view.blocks, { onButton: () => toast("Buttons in modals are not emulated.") }));
      $("#modal-submit").innerHTML = SlackText.plain((view.submit && view.submit.text) || "Submit");
      $("#modal-submit").hidden = !view.submit;
      $("#modal-cancel").innerHTML = SlackText.plain((view.close && view.close.text) || "Cancel");
    }
    for (const node of form.querySelectorAll(".input-error")) node.textContent = view.errors[node.dataset.blockId] || "";
    backdrop.hidden = false;
  }

  async function submitModal(e) {
    e.preventDefault();
    const form = $("#modal");
    try {
      const result = await api("POST", `/views/${form.dataset.viewId}/submit`, { user: app.user, values: BlockKit.readInputs(form) });
      if (!result.ok && result.error !== "required_fields") toast(`We had some trouble connecting (${result.outcome || result.status}).`);
    } catch (err) {
      toast(`Submit failed: ${err.message}`);
    }
    await refreshModal();
  }

  async function cancelModal() {
    const form = $("#modal");
    try { await api("POST", `/views/${form.dataset.viewId}/close`, { user: app.user }); } catch (err) { toast(err.message); }
    await refreshModal();
  }

  // --- activity log ---------------------------------------------------------------------------

  async function refreshActivity() {
    const [{ calls }, { deliveries }] = await Promise.all([api("GET", "/calls"), api("GET", "/deliveries")]);
    const rows = [
      ...calls.map((c) => ({ time: c.time, kind: "call", ok: c.ok, text: `${c.method} → ${c.status}${c.error ? ` ${c.error}` : ""}` })),
      ...deliveries.map((d) => ({
        time: d.time, kind: d.kind, ok: d.outcome === "ok",
        text: `${d.type}${d.retry_num ? ` retry ${d.retry_num} (${d.retry_reason})` : ""} → ${d.status ?? d.outcome}`,
      })),
    ].sort((a, b) => a.time - b.time).slice(-60).reverse();
    $("#activity-log").replaceChildren(...rows.map((r) =>
      el("li", { class: `activity ${r.kind} ${r.ok ? "ok" : "failed"}` }, `<span class="muted">${formatTime(r.time)}</span> ${SlackText.esc(r.text)}`)));
  }

  // --- live updates ---------------------------------------------------------------------------

  function debounce(fn, ms) {
    let timer = null;
    return () => { clearTimeout(timer); timer = setTimeout(() => fn().catch((err) => toast(err.message)), ms); };
  }

  const refreshSoon = debounce(refresh, 40);
  const activitySoon = debounce(refreshActivity, 150);
  const stateSoon = debounce(async () => { await loadState(); await refresh(); }, 40);
  const homeSoon = debounce(refreshHome, 40);

  function listen() {
    const stream = new EventSource("/stream");
    for (const type of ["message", "message_changed", "message_deleted", "reaction", "status", "view"]) {
      stream.addEventListener(type, refreshSoon);
    }
    stream.addEventListener("home", homeSoon);
    stream.addEventListener("reset", () => { app.openReplies = {}; refreshSoon(); activitySoon(); });
    stream.addEventListener("config", stateSoon);
    stream.addEventListener("call", activitySoon);
    stream.addEventListener("delivery", activitySoon);
    stream.addEventListener("hello", () => { document.body.dataset.live = "true"; refreshSoon(); activitySoon(); });
  }

  async function main() {
    await loadState();
    $("#user-picker").addEventListener("change", (e) => {
      app.user = e.target.value;
      renderChannels();
      refresh();
      if (app.view === "home") openHome().catch((err) => toast(err.message));
    });
    $("#home-link").addEventListener("click", () => openHome().catch((err) => toast(`Home failed: ${err.message}`)));
    $("#composer").addEventListener("submit", async (e) => {
      e.preventDefault();
      const input = $("#composer-input");
      const text = input.value;
      if (!text.trim()) return;
      input.value = "";
      if (app.view === "home") showChannel();
      app.stick = true; // what I just posted comes into view
      await post(text, null, false);
    });
    $("#composer-input").addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); $("#composer").requestSubmit(); }
    });
    $("#modal").addEventListener("submit", submitModal);
    $("#modal-cancel").addEventListener("click", cancelModal);
    await refresh();
    await refreshActivity();
    listen();
    document.body.dataset.ready = "true";
  }

  main().catch((err) => toast(`Emulator page failed to start: ${err.message}`));
})();
