// Block Kit to DOM: the blocks a bot posts in messages (section, header, divider, context, actions,
// image, rich_text, markdown) and the inputs of a modal. Buttons call ctx.onButton(block, element).
"use strict";

const BlockKit = (() => {
  function el(tag, attrs = {}, html) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs)) {
      if (value !== undefined && value !== null) node.setAttribute(key, value);
    }
    if (html !== undefined) node.innerHTML = html;
    return node;
  }

  function text(obj) {
    if (!obj) return "";
    if (typeof obj === "string") return SlackText.mrkdwn(obj);
    return obj.type === "mrkdwn" ? SlackText.mrkdwn(obj.text) : SlackText.plain(obj.text);
  }

  function button(block, element, ctx) {
    const node = el("button", {
      type: "button",
      class: `block-button ${element.style || "default"}`,
      "data-action-id": element.action_id || "",
      "data-block-id": block.block_id || "",
      "data-value": element.value ?? "",
      "data-style": element.style || "default",
      "data-has-confirm": element.confirm ? "true" : "false",
    }, text(element.text));
    node.addEventListener("click", () => ctx.onButton(block, element, node));
    return node;
  }

  function element(block, item, ctx) {
    if (!item) return el("span");
    if (item.type === "button") return button(block, item, ctx);
    if (item.type === "image") return el("img", { class: "block-image-small", src: item.image_url, alt: item.alt_text });
    if (item.type === "mrkdwn" || item.type === "plain_text") return el("span", { class: "context-text" }, text(item));
    if (item.type === "overflow") {  // "⋯": picking an option is the click (its value identifies it)
      const select = el("select", { class: "block-select overflow", "data-action-id": item.action_id, "aria-label": "More actions" });
      select.append(el("option", { value: "" }, "⋯"));
      for (const option of item.options || []) select.append(el("option", { value: option.value }, text(option.text)));
      select.addEventListener("change", () => {
        const value = select.value;
        select.value = "";
        if (value) ctx.onButton(block, { action_id: item.action_id, value, confirm: item.confirm }, select);
      });
      return select;
    }
    if (item.type === "static_select") {
      const select = el("select", { class: "block-select", disabled: "disabled", "data-action-id": item.action_id });
      for (const option of item.options || []) select.append(el("option", { value: option.value }, text(option.text)));
      return select;
    }
    return el("span", { class: "unsupported" }, `[${SlackText.esc(item.type)}]`);
  }

  function richElements(items) {
    return (items || []).map((item) => {
      if (item.type === "text") {
        let html = SlackText.esc(item.text).replace(/\n/g, "<br>");
        const style = item.style || {};
        if (style.code) html = `<code>${html}</code>`;
        if (style.bold) html = `<b>${html}</b>`;
        if (style.italic) html = `<i>${html}</i>`;
        if (style.strike) html = `<s>${html}</s>`;
        return html;
      }
      if (item.type === "link") return SlackText.mrkdwn(`<${item.url}${item.text ? `|${item.text}` : ""}>`);
      if (item.type === "user") return SlackText.mrkdwn(`<@${item.user_id}>`);
      if (item.type === "usergroup") return SlackText.mrkdwn(`<!subteam^${item.usergroup_id}>`);
      if (item.type === "channel") return SlackText.mrkdwn(`<#${item.channel_id}>`);
      if (item.type === "broadcast") return SlackText.mrkdwn(`<!${item.range}>`);
      if (item.type === "emoji") return item.unicode ? String.fromCodePoint(parseInt(item.unicode, 16)) : SlackText.emoji(item.name);
      return "";
    }).join("");
  }

  function richText(block) {
    const node = el("div", { class: "rich-text" });
    for (const part of block.elements || []) {
      if (part.type === "rich_text_section") node.append(el("div", {}, richElements(part.elements)));
      else if (part.type === "rich_text_preformatted") node.append(el("pre", { class: "code-block" }, richElements(part.elements)));
      else if (part.type === "rich_text_quote") node.append(el("blockquote", {}, richElements(part.elements)));
      else if (part.type === "rich_text_list") {
        const list = el(part.style === "ordered" ? "ol" : "ul", { style: `margin-left:${(part.indent || 0) * 16}px` });
        for (const item of part.elements || []) list.append(el("li", {}, richElements(item.elements)));
        node.append(list);
      }
    }
    return node;
  }

  function section(block, ctx) {
    const node = el("div", { class: "block-section" });
    const body = el("div", { class: "section-body" });
    if (block.text) body.append(el("div", { class: "section-text" }, text(block.text)));
    if (block.fields) {
      const grid = el("div", { class: "section-fields" });
      for (const field of block.fields) grid.append(el("div", { class: "section-field" }, text(field)));
      body.append(grid);
    }
    node.append(body);
    if (block.accessory) {
      const accessory = el("div", { class: "accessory" });
      accessory.append(element(block, block.accessory, ctx));
      node.append(accessory);
    }
    return node;
  }

  function input(block) {
    const item = block.element || {};
    const attrs = { "data-block-id": block.block_id || "", "data-action-id": item.action_id || "", "data-type": item.type };
    const node = el("label", { class: "block-input", "data-block-id": block.block_id || "" });
    node.append(el("span", { class: "input-label" }, SlackText.plain(block.label && block.label.text) +
      (block.optional ? ' <span class="muted">(optional)</span>' : "")));
    let field;
    if (item.type === "static_select" || item.type === "radio_buttons") {
      field = el("select", { ...attrs, class: "modal-field" });
      field.append(el("option", { value: "" }, item.placeholder ? SlackText.plain(item.placeholder.text) : "Select…"));
      for (const option of item.options || []) field.append(el("option", { value: option.value }, text(option.text)));
      if (item.initial_option) field.value = item.initial_option.value;
    } else if (item.type === "checkboxes") {
      field = el("div", { ...attrs, class: "modal-field checkbox-group" });
      for (const option of item.options || []) {
        const row = el("label", { class: "checkbox" });
        row.append(el("input", { type: "checkbox", value: option.value }), el("span", {}, text(option.text)));
        field.append(row);
      }
    } else {
      field = el(item.multiline ? "textarea" : "input", { ...attrs, class: "modal-field", type: "text" });
      if (item.placeholder) field.placeholder = item.placeholder.text;
      if (item.initial_value) field.value = item.initial_value;
    }
    node.append(field);
    if (block.hint) node.append(el("span", { class: "input-hint muted" }, SlackText.plain(block.hint.text)));
    node.append(el("span", { class: "input-error", "data-block-id": block.block_id || "" }));
    return node;
  }

  // A context_actions block's feedback_buttons: two buttons clicked by the element's action_id and their value.
  function contextActions(block, item, ctx) {
    if (!item || item.type !== "feedback_buttons") return [element(block, item, ctx)];
    return ["positive_button", "negative_button"].filter((side) => item[side]).map((side) =>
      button(block, { action_id: item.action_id, value: item[side].value, text: item[side].text }, ctx));
  }

  // A streamed message's tasks (chat.startStream / appendStream chunks), as the timeline Slack shows.
  const TASK_ICONS = { pending: "○", in_progress: "◌", complete: "✓", error: "✗" };
  function tasks(stream) {
    const node = el("div", { class: "stream-tasks", "data-stream-state": stream.state });
    if (stream.plan_title) node.append(el("div", { class: "stream-plan" }, SlackText.esc(stream.plan_title)));
    for (const task of stream.tasks || []) {
      const row = el("div", { class: `stream-task ${task.status}`, "data-task-id": task.id },
        `${TASK_ICONS[task.status] || "?"} ${SlackText.markdown(task.title || "")}`);
      if (task.details) row.append(el("div", { class: "stream-task-details muted" }, SlackText.markdown(task.details)));
      if (task.output) row.append(el("div", { class: "stream-task-output" }, SlackText.markdown(task.output)));
      node.append(row);
    }
    return node;
  }

  function block(item, ctx) {
    const attrs = { class: `block block-${item.type}`, "data-block-type": item.type, "data-block-id": item.block_id };
    const wrap = el("div", attrs);
    switch (item.type) {
      case "section": wrap.append(section(item, ctx)); break;
      case "header": wrap.append(el("div", { class: "block-header-text" }, SlackText.plain(item.text && item.text.text))); break;
      case "divider": wrap.append(el("hr")); break;
      case "context": for (const part of item.elements || []) wrap.append(element(item, part, ctx)); break;
      case "actions": for (const part of item.elements || []) wrap.append(element(item, part, ctx)); break;
      case "image": wrap.append(el("img", { class: "block-image", src: item.image_url, alt: item.alt_text })); break;
      case "rich_text": wrap.append(richText(item)); break;
      case "markdown": wrap.append(el("div", { class: "markdown" }, SlackText.markdown(item.text))); break;
      case "input": wrap.append(input(item)); break;
      case "context_actions": for (const part of item.elements || []) wrap.append(...contextActions(item, part, ctx)); break;
      default: wrap.append(el("span", { class: "unsupported" }, `[unsupported block: ${SlackText.esc(item.type)}]`));
    }
    return wrap;
  }

  function render(blocks, ctx) {
    const node = el("div", { class: "message-blocks" });
    for (const item of blocks || []) node.append(block(item, ctx));
    return node;
  }

  // Modal values as the control API takes them: {block_id: {action_id: value}}.
  function readInputs(container) {
    const values = {};
    for (const field of container.querySelectorAll(".modal-field")) {
      const blockId = field.dataset.blockId;
      const actionId = field.dataset.actionId;
      let value = field.value;
      if (field.dataset.type === "checkboxes") {
        value = [...field.querySelectorAll("input:checked")].map((box) => box.value);
      }
      values[blockId] = { ...(values[blockId] || {}), [actionId]: value };
    }
    return values;
  }

  return { render, text, readInputs, el, tasks };
})();
