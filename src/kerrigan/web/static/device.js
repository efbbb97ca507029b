// The device page: its board's power buttons post in place (the forms work without this, reloading the
// page), the holder's page reads the power state as it opens, and the live console (for the people who may
// use it: the server says who) streams the board's bytes into a <pre> and sends what is typed there.
// The board's output is added as text, never as markup; the oldest goes past MAX_CHARS.
"use strict";
const MAX_CHARS = 1024 * 1024;

function powerSection(section) {
  const state = document.getElementById("power-state");
  const words = document.getElementById("power-words");
  const forms = Array.from(section.querySelectorAll("form[data-power]"));
  const ask = async (form) => {
    const action = form.dataset.power;
    forms.forEach((f) => f.querySelectorAll("button").forEach((b) => (b.disabled = true)));
    words.textContent = `(asking its runner host: ${action}…)`;
    try {
      // form.action would be the input named "action", not the form's address.
      const answer = await fetch(form.getAttribute("action"), {
        method: "POST",
        body: new FormData(form),
        headers: { Accept: "application/json" },
        credentials: "same-origin",
      });
      let body = null;
      try {
        body = await answer.json();
      } catch (_) {
        body = null;
      }
      if (answer.ok && body && typeof body.state === "string") {
        state.textContent = body.state;
        state.className = `power-${body.state}`;
        words.textContent = `(as its switch read it just now, after ${action})`;
      } else {
        const message = body && body.error ? body.error.message : `the server answered ${answer.status}`;
        words.textContent = `(${action} failed: ${message})`;
      }
    } catch (_) {
      words.textContent = `(${action} failed: the server could not be reached)`;
    } finally {
      forms.forEach((f) => f.querySelectorAll("button").forEach((b) => (b.disabled = false)));
    }
  };
  for (const form of forms) {
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      ask(form);
    });
  }
  const first = forms.find((form) => form.dataset.power === section.dataset.askNow);
  if (first) ask(first);
}

// The bytes a key sends to a serial console, or null for a key that sends nothing (left to the browser).
const KEYS = {
  Enter: "\r", Backspace: "\x7f", Tab: "\t", Escape: "\x1b", Delete: "\x1b[3~",
  ArrowUp: "\x1b[A", ArrowDown: "\x1b[B", ArrowRight: "\x1b[C", ArrowLeft: "\x1b[D",
  Home: "\x1b[H", End: "\x1b[F", PageUp: "\x1b[5~", PageDown: "\x1b[6~",
};

function keyBytes(event) {
  if (event.metaKey) return null;
  if (event.ctrlKey && !event.altKey && event.key.length === 1) {
    const key = event.key.toLowerCase();
    if (key === "c" && String(window.getSelection())) return null; // copying what is selected
    if (key >= "a" && key <= "z") return String.fromCharCode(key.charCodeAt(0) - 96);
    return { "[": "\x1b", "\\": "\x1c", "]": "\x1d", " ": "\x00" }[key] || null;
  }
  if (event.key in KEYS) return KEYS[event.key];
  if (event.key.length === 1 && !event.ctrlKey) return (event.altKey ? "\x1b" : "") + event.key;
  return null;
}

// What a terminal would not print as it is: colour and cursor sequences, OSC titles.
const ESCAPES = /\x1b\[[0-9;?]*[ -\/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[=>78]/g;

function consoleSection(section) {
  const screen = document.getElementById("console-screen");
  const status = document.getElementById("console-status");
  const mode = document.getElementById("console-mode");
  const button = document.getElementById("console-connect");
  const encoder = new TextEncoder();
  let readOnly = section.dataset.readOnly === "true";
  let socket = null;
  let decoder = null;
  let size = 0;
  let said = "";

  const show = (text) => {
    text = text.replace(ESCAPES, "").replace(/\r\n/g, "\n").replace(/\r/g, "");
    let kept = "";
    for (const character of text) {
      if (character === "\b") {
        if (kept) kept = kept.slice(0, -1);
        else if (screen.lastChild && screen.lastChild.textContent) {
          screen.lastChild.textContent = screen.lastChild.textContent.slice(0, -1);
          size -= 1;
        }
      } else if (character === "\x07" || character === "\x00") {
        continue;
      } else {
        kept += character;
      }
    }
    if (!kept) return;
    screen.appendChild(document.createTextNode(kept));
    size += kept.length;
    while (size > MAX_CHARS && screen.firstChild && screen.firstChild !== screen.lastChild) {
      size -= screen.firstChild.textContent.length;
      screen.removeChild(screen.firstChild);
    }
    screen.scrollTop = screen.scrollHeight;
  };

  const open = () => {
    const url = new URL(section.dataset.console, window.location.href);
    url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
    let opened = false;
    said = "";
    decoder = new TextDecoder();
    socket = new WebSocket(url.toString());
    socket.binaryType = "arraybuffer";
    status.textContent = "Connecting (the board's runner host opens its console)…";
    button.textContent = "Disconnect";
    socket.onmessage = (event) => {
      if (typeof event.data !== "string") {
        show(decoder.decode(new Uint8Array(event.data), { stream: true }));
        return;
      }
      const frame = JSON.parse(event.data);
      if (frame.type === "open") {
        opened = true;
        readOnly = Boolean(frame.read_only);
        section.classList.toggle("read-only", readOnly);
        status.textContent = readOnly ? "Connected, read-only." : "Connected: click the console and type.";
        if (readOnly && section.dataset.readOnly !== "true") {
          mode.textContent = "Read-only for now: someone else types on this console.";
        }
        screen.focus();
      } else if (frame.type === "notice") {
        status.textContent = String(frame.message);
      } else if (frame.type === "end") {
        said = `The console session ended: ${String(frame.reason)}.`;
        status.textContent = said;
      }
    };
    socket.onclose = (event) => {
      socket = null;
      button.textContent = "Connect";
      if (said) return;
      status.textContent = opened
        ? `Disconnected${event.reason ? `: ${event.reason}` : ""}.`
        : "Could not connect: reload the page to see whether the console can be opened now.";
    };
  };

  screen.addEventListener("keydown", (event) => {
    if (readOnly || socket === null || socket.readyState !== WebSocket.OPEN) return;
    const bytes = keyBytes(event);
    if (bytes === null) return;
    event.preventDefault();
    socket.send(encoder.encode(bytes));
  });
  screen.addEventListener("paste", (event) => {
    if (readOnly || socket === null || socket.readyState !== WebSocket.OPEN) return;
    event.preventDefault();
    const text = (event.clipboardData || window.clipboardData).getData("text");
    if (text) socket.send(encoder.encode(text.replace(/\r?\n/g, "\r")));
  });
  button.addEventListener("click", () => (socket === null ? open() : socket.close(1000, "you left")));
  section.classList.toggle("read-only", readOnly);
  button.hidden = false;
}

document.addEventListener("DOMContentLoaded", () => {
  const power = document.getElementById("power");
  if (power) powerSection(power);
  const panel = document.querySelector("section[data-console]");
  if (panel && "WebSocket" in window) consoleSection(panel);
});
