// Slack text formatting to HTML: mrkdwn (*bold*, _italic_, ~strike~, `code`, ```blocks```, > quotes,
// <url|label>, <@U123>, <#C123|name>, <!here>, <!subteam^S123>, <!date^…>, :emoji:) and the markdown block's
// standard Markdown basics. Everything is HTML-escaped before any markup is added.
"use strict";

const SlackText = (() => {
  const EMOJI = {
    eyes: "👀", white_check_mark: "✅", heavy_check_mark: "✔️", x: "❌", warning: "⚠️",
    hourglass: "⌛", hourglass_flowing_sand: "⏳", rotating_light: "🚨", fire: "🔥", tada: "🎉",
    thumbsup: "👍", "+1": "👍", thumbsdown: "👎", "-1": "👎", robot_face: "🤖", no_entry: "⛔",
    stop_sign: "🛑", lock: "🔒", white_circle: "⚪", large_green_circle: "🟢", red_circle: "🔴",
    large_yellow_circle: "🟡", memo: "📝", gear: "⚙️", mag: "🔍", information_source: "ℹ️",
    arrows_counterclockwise: "🔄", clock1: "🕐", stopwatch: "⏱️", zap: "⚡", bulb: "💡",
    speech_balloon: "💬", raised_hand: "✋", wave: "👋", scroll: "📜", octagonal_sign: "🛑",
    no_entry_sign: "🚫", globe_with_meridians: "🌐", leftwards_arrow_with_hook: "↩️", link: "🔗",
    hourglass_done: "⌛", grey_question: "❔", busts_in_silhouette: "👥", dart: "🎯", point_right: "👉",
  };

  let names = { users: {}, channels: {}, groups: {} };

  function setNames(next) { names = next; }

  function esc(s) {
    return String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
  }

  // Slack stores &, < and > escaped; show them as characters.
  function unesc(s) {
    return String(s).replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&");
  }

  function emoji(name) {
    return EMOJI[name] || `:${name}:`;
  }

  function safeUrl(url) {
    return /^(https?:|mailto:)/i.test(url) ? url : "#";
  }

  function token(body) {
    const [target, label] = body.split("|", 2);
    if (target.startsWith("@")) {
      const id = target.slice(1);
      return `<span class="mention" data-user-id="${esc(id)}">@${esc(names.users[id] || label || id)}</span>`;
    }
    if (target.startsWith("#")) {
      const id = target.slice(1);
      return `<span class="mention channel">#${esc(label || names.channels[id] || id)}</span>`;
    }
    if (target.startsWith("!subteam^")) {
      const id = target.slice("!subteam^".length);
      return `<span class="mention group">@${esc(names.groups[id] || label || id)}</span>`;
    }
    if (target.startsWith("!date^")) {
      // <!date^EPOCH^FORMAT|fallback>: Slack shows the time in the reader's zone.
      const epoch = Number(target.split("^")[1]);
      const shown = Number.isFinite(epoch) ? new Date(epoch * 1000).toLocaleString() : unesc(label || "");
      return `<span class="date">${esc(shown)}</span>`;
    }
    if (target.startsWith("!")) return `<span class="mention broadcast">@${esc(target.slice(1))}</span>`;
    const shown = label ? unesc(label) : unesc(target);
    return `<a href="${esc(safeUrl(unesc(target)))}" target="_blank" rel="noopener">${esc(shown)}</a>`;
  }

  // Bold/italic/strike/emoji on already-escaped text.
  function styles(html) {
    const edge = "(^|[\\s(\\[>])";
    const end = "(?=$|[\\s).,!?:;\\]<])";
    return html
      .replace(new RegExp(`${edge}\\*([^*\\n]+?)\\*${end}`, "g"), "$1<b>$2</b>")
      .replace(new RegExp(`${edge}_([^_\\n]+?)_${end}`, "g"), "$1<i>$2</i>")
      .replace(new RegExp(`${edge}~([^~\\n]+?)~${end}`, "g"), "$1<s>$2</s>")
      .replace(/:([a-z0-9_+-]+):/g, (m, name) => emoji(name));
  }

  function line(text) {
    let out = "";
    let last = 0;
    const re = /<([^<>\s][^<>]*)>/g;
    for (let m = re.exec(text); m; m = re.exec(text)) {
      out += styles(esc(unesc(text.slice(last, m.index)))) + token(m[1]);
      last = re.lastIndex;
    }
    return out + styles(esc(unesc(text.slice(last))));
  }

  function inline(text) {
    // Code struck through as a whole (~`code`~) is struck code, as Slack shows it.
    return text.split(/(~`[^`\n]+`~|`[^`\n]+`)/).map((seg) => {
      if (seg.length > 3 && seg.startsWith("~`") && seg.endsWith("`~")) return `<s><code>${esc(unesc(seg.slice(2, -2)))}</code></s>`;
      return seg.length > 1 && seg.startsWith("`") && seg.endsWith("`")
        ? `<code>${esc(unesc(seg.slice(1, -1)))}</code>` : line(seg);
    }).join("");
  }

  function paragraph(text) {
    const out = [];
    for (const raw of text.split("\n")) {
      const quote = raw.match(/^(&gt;|>)\s?(.*)$/);
      out.push(quote ? `<blockquote>${inline(quote[2])}</blockquote>` : `${inline(raw)}<br>`);
    }
    return out.join("").replace(/<br>$/, "");
  }

  function mrkdwn(text) {
    return String(text || "").split("```").map((part, i) =>
      i % 2 ? `<pre class="code-block">${esc(unesc(part.replace(/^\n/, "")))}</pre>` : paragraph(part)).join("");
  }

  function plain(text) {
    return esc(unesc(String(text || ""))).replace(/:([a-z0-9_+-]+):/g, (m, name) => emoji(name));
  }

  // Markdown's emphasis, strike, emoji and links on already-escaped text, as Slack's markdown block
  // shows them (docs.slack.dev/reference/block-kit/blocks/markdown-block): **b**, __b__, *i*, _i_,
  // ~~s~~, :emoji:, [label](url), and a bare URL as a link showing itself (Slack links those).
  // Edges as in mrkdwn's styles(): no emphasis inside words or URLs.
  function markdownStyles(html) {
    const edge = "(^|[\\s(\\[>])";
    const end = "(?=$|[\\s).,!?:;\\]<])";
    return html
      .replace(/\*\*([^*]+)\*\*/g, "<b>$1</b>")
      .replace(new RegExp(`${edge}__([^_\\n]+?)__${end}`, "g"), "$1<b>$2</b>")
      .replace(new RegExp(`${edge}\\*([^*\\n]+?)\\*${end}`, "g"), "$1<i>$2</i>")
      .replace(new RegExp(`${edge}_([^_\\n]+?)_${end}`, "g"), "$1<i>$2</i>")
      .replace(/~~([^~\n]+?)~~/g, "<s>$1</s>")
      .replace(/:([a-z0-9_+-]+):/g, (m, name) => emoji(name))
      .replace(/\[([^\]]+)\]\(([^)\s]+)\)/g, (m, label, url) =>
        `<a href="${esc(safeUrl(unesc(url)))}" target="_blank" rel="noopener">${label}</a>`)
      .replace(/(^|[\s(])(https?:\/\/[^\s<>()"]+)/g, (m, before, url) =>
        `${before}<a href="${esc(safeUrl(unesc(url)))}" target="_blank" rel="noopener">${url}</a>`);
  }

  // One line of Markdown outside code blocks: code spans verbatim; raw <…> tokens (mentions) parsed;
  // entities decoded for display (Slack stores &, < and > escaped) and everything else escaped.
  function markdownLine(text) {
    return text.split(/(`[^`\n]+`)/).map((seg) => {
      if (seg.length > 1 && seg.startsWith("`") && seg.endsWith("`")) return `<code>${esc(unesc(seg.slice(1, -1)))}</code>`;
      let out = "";
      let last = 0;
      const re = /<([^<>\s][^<>]*)>/g;
      for (let m = re.exec(seg); m; m = re.exec(seg)) {
        out += markdownStyles(esc(unesc(seg.slice(last, m.index)))) + token(m[1]);
        last = re.lastIndex;
      }
      return out + markdownStyles(esc(unesc(seg.slice(last))));
    }).join("");
  }

  // The markdown block: standard Markdown (headings, lists, quotes, emphasis, emoji, links, code).
  // A quote starts with the character ">" (an entity &gt; is text, as in CommonMark).
  function markdown(text) {
    const parts = String(text || "").split("```");
    return parts.map((part, i) => {
      if (i % 2) return `<pre class="code-block">${esc(unesc(part.replace(/^[a-z]*\n/, "")))}</pre>`;
      return part.split("\n").map((raw) => {
        const quote = raw.match(/^ {0,3}> ?(.*)$/);
        if (quote) return `<blockquote>${markdownLine(quote[1])}</blockquote>`;
        const heading = raw.match(/^ {0,3}(#{1,6})\s+(.*)$/);
        if (heading) return `<div class="md-h${heading[1].length}">${markdownLine(heading[2])}</div>`;
        const item = raw.match(/^\s*(?:[-*+]|\d+\.)\s+(.*)$/);
        if (item) return `<div class="md-li">• ${markdownLine(item[1])}</div>`;
        return `${markdownLine(raw)}<br>`;
      }).join("").replace(/<br>$/, "");
    }).join("");
  }

  return { setNames, mrkdwn, plain, markdown, esc, emoji };
})();
