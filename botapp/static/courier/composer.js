/* The composer of Telegram messages in the console (broadcasts, scheduled messages, sequence steps):
 * a formatting toolbar that writes Telegram's HTML into the text field, and a live preview of the
 * text (and its buttons) as Telegram shows it.
 *
 * A static file, as the console's Content-Security-Policy wants (no inline script, no inline handler).
 * The preview is built node by node with createElement and textContent: nothing typed is ever parsed
 * as HTML by the browser. Only the tags Telegram accepts (botapp/services/telegram_html.py, whose
 * rules this mirrors) become elements; anything else shows as the text it is. */
(function () {
  "use strict";

  // Telegram's tags -> the element the preview shows for each (a spoiler is blurred, an emoji is its text).
  var TAGS = {
    b: "b", strong: "b", i: "i", em: "i", u: "u", ins: "u", s: "s", strike: "s", del: "s",
    span: "span", "tg-spoiler": "span", a: "a", "tg-emoji": "span", code: "code", pre: "pre", blockquote: "blockquote"
  };
  var ENTITIES = { lt: "<", gt: ">", amp: "&", quot: '"' }; // the named entities Telegram decodes
  var TOOLS = [
    ["b", "B", "Bold", "<b>", "</b>"],
    ["i", "I", "Italic", "<i>", "</i>"],
    ["u", "U", "Underline", "<u>", "</u>"],
    ["s", "S", "Strikethrough", "<s>", "</s>"],
    ["spoiler", "Spoiler", "Spoiler (hidden until tapped)", "<tg-spoiler>", "</tg-spoiler>"],
    ["code", "Code", "Code", "<code>", "</code>"],
    ["link", "Link", "Link: type the address where https:// is selected", '<a href="https://">', "</a>"],
    ["quote", "Quote", "Quote", "<blockquote>", "</blockquote>"]
  ];

  function decode(text) {
    return text.replace(/&(#x[0-9a-f]+|#[0-9]+|[a-z]+);/gi, function (whole, name) {
      if (name[0] === "#") {
        var code = name[1] === "x" || name[1] === "X" ? parseInt(name.slice(2), 16) : parseInt(name.slice(1), 10);
        return code > 0 && code <= 0x10ffff ? String.fromCodePoint(code) : whole;
      }
      return Object.prototype.hasOwnProperty.call(ENTITIES, name.toLowerCase()) ? ENTITIES[name.toLowerCase()] : whole;
    });
  }

  function attributes(source) {
    var found = {}, re = /([a-z-]+)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+)))?/gi, m;
    while ((m = re.exec(source)) !== null) {
      found[m[1].toLowerCase()] = decode(m[2] !== undefined ? m[2] : m[3] !== undefined ? m[3] : m[4] || "");
    }
    return found;
  }

  // The element for an opening tag Telegram accepts, or null (the tag then shows as text).
  function opening(name, attrs) {
    var el;
    if (name === "a") {
      var href = (attrs.href || "").trim();
      if (!/^(https?:\/\/|tg:\/\/)/i.test(href)) return null;
      el = document.createElement("a");
      if (/^https?:\/\//i.test(href)) {
        el.href = href;
        el.target = "_blank";
        el.rel = "noopener";
      } else {
        el.title = href; // tg:// has no page to open in a browser
      }
      return el;
    }
    if (name === "span" && attrs["class"] !== "tg-spoiler") return null;
    el = document.createElement(TAGS[name]);
    if (name === "span" || name === "tg-spoiler") el.className = "tg-spoiler";
    return el;
  }

  /* Render Telegram HTML `text` into `target` (emptied first). */
  function render(text, target) {
    while (target.firstChild) target.removeChild(target.firstChild);
    var stack = [{ name: null, el: target }];
    var re = /<(\/?)([a-z][a-z0-9-]*)((?:\s[^<>]*)?)>/gi, last = 0, m;
    function put(s) {
      if (s) stack[stack.length - 1].el.appendChild(document.createTextNode(decode(s)));
    }
    function literal(s) {
      if (s) stack[stack.length - 1].el.appendChild(document.createTextNode(s));
    }
    while ((m = re.exec(text)) !== null) {
      put(text.slice(last, m.index));
      last = re.lastIndex;
      var closing = m[1] === "/", name = m[2].toLowerCase();
      if (!Object.prototype.hasOwnProperty.call(TAGS, name)) {
        literal(m[0]);
        continue;
      }
      if (closing) {
        var depth = -1;
        for (var k = stack.length - 1; k > 0; k--) if (stack[k].name === name) { depth = k; break; }
        if (depth < 0) literal(m[0]);
        else stack.length = depth;
        continue;
      }
      var el = opening(name, attributes(m[3] || ""));
      if (!el) {
        literal(m[0]);
        continue;
      }
      stack[stack.length - 1].el.appendChild(el);
      stack.push({ name: name, el: el });
    }
    put(text.slice(last));
  }

  // Buttons as the bubble shows them: one row per line, "||" between buttons, the text before the first "|".
  function renderButtons(text, target) {
    while (target.firstChild) target.removeChild(target.firstChild);
    text.split("\n").forEach(function (line) {
      if (!line.trim()) return;
      var row = document.createElement("div");
      row.className = "tg-button-row";
      line.split("||").forEach(function (part) {
        var button = document.createElement("span");
        button.className = "tg-button";
        button.textContent = part.split("|")[0].trim() || "…";
        row.appendChild(button);
      });
      target.appendChild(row);
    });
  }

  function wrap(field, before, after, selectInside) {
    var start = field.selectionStart, end = field.selectionEnd, value = field.value;
    var chosen = value.slice(start, end);
    field.value = value.slice(0, start) + before + chosen + after + value.slice(end);
    field.focus();
    if (selectInside) {
      var at = start + before.indexOf(selectInside);
      field.setSelectionRange(at, at + selectInside.length);
    } else {
      field.setSelectionRange(start + before.length, start + before.length + chosen.length);
    }
    field.dispatchEvent(new Event("input", { bubbles: true }));
    field.dispatchEvent(new Event("change", { bubbles: true }));
  }

  function buttonsFieldFor(field) {
    var name = field.name.replace(/text$/, "buttons");
    return name !== field.name && field.form ? field.form.elements.namedItem(name) : null;
  }

  function attach(field) {
    if (field.dataset.composerReady || field.name.indexOf("__prefix__") >= 0) return; // the inline's template: its copies get their own
    field.dataset.composerReady = "1";
    var bar = document.createElement("div");
    bar.className = "composer-toolbar";
    bar.setAttribute("role", "toolbar");
    bar.setAttribute("aria-label", "Formatting");
    TOOLS.forEach(function (tool) {
      var button = document.createElement("button");
      button.type = "button";
      button.textContent = tool[1];
      button.title = tool[2];
      button.setAttribute("aria-label", tool[2].split(" (")[0].split(":")[0]);
      button.dataset.tool = tool[0];
      button.className = "composer-tool composer-tool-" + tool[0];
      button.addEventListener("click", function () {
        wrap(field, tool[3], tool[4], tool[0] === "link" ? "https://" : null);
      });
      bar.appendChild(button);
    });
    field.parentNode.insertBefore(bar, field);

    var preview = document.createElement("div");
    preview.className = "composer-preview";
    var caption = document.createElement("div");
    caption.className = "composer-preview-caption";
    caption.textContent = "Preview, as Telegram shows it";
    var bubble = document.createElement("div");
    bubble.className = "tg-bubble";
    var body = document.createElement("div");
    body.className = "tg-text";
    var buttons = document.createElement("div");
    buttons.className = "tg-buttons";
    bubble.appendChild(body);
    bubble.appendChild(buttons);
    preview.appendChild(caption);
    preview.appendChild(bubble);
    field.parentNode.insertBefore(preview, field.nextSibling);

    var buttonsField = buttonsFieldFor(field);
    function update() {
      render(field.value, body);
      preview.classList.toggle("is-empty", !field.value.trim());
      if (buttonsField) renderButtons(buttonsField.value, buttons);
    }
    field.addEventListener("input", update);
    if (buttonsField) buttonsField.addEventListener("input", update);
    update();
  }

  function attachAll(root) {
    (root || document).querySelectorAll("textarea[data-composer]").forEach(attach);
  }

  window.courierComposer = { render: render };
  document.addEventListener("DOMContentLoaded", function () {
    attachAll(document);
    // A sequence's "Add another step" copies an empty form: give the copy its toolbar and preview.
    new MutationObserver(function () { attachAll(document); }).observe(document.body, { childList: true, subtree: true });
  });
})();
