// The session page: a running job's output streams in (server-sent events from the <pre data-stream>
// URL) instead of the page reloading. Output is added as text, never as markup; the oldest text goes
// once the <pre> holds more than MAX_CHARS, so a chatty job cannot grow the page without end. Without
// JavaScript the page shows the tail and reloads itself (the <noscript> refresh).
"use strict";
const MAX_CHARS = 1024 * 1024;

function follow(pre) {
  const status = document.getElementById(pre.dataset.status || "");
  const url = new URL(pre.dataset.stream, window.location.href);
  url.searchParams.set("after", pre.dataset.after || "-1");
  const source = new EventSource(url.toString());
  let size = pre.textContent.length;

  const append = (text, marked) => {
    const node = document.createTextNode(text);
    if (marked) {
      const span = document.createElement("span");
      span.className = "truncated";
      span.appendChild(node);
      pre.appendChild(span);
    } else {
      pre.appendChild(node);
    }
    size += text.length;
    while (size > MAX_CHARS && pre.firstChild && pre.firstChild !== pre.lastChild) {
      size -= pre.firstChild.textContent.length;
      pre.removeChild(pre.firstChild);
    }
    const atBottom = window.innerHeight + window.scrollY >= document.body.scrollHeight - 40;
    if (atBottom) pre.lastChild.scrollIntoView({ block: "end" });
  };

  source.onmessage = (event) => {
    const chunk = JSON.parse(event.data);
    append(String(chunk.data), Boolean(chunk.evicted));
    pre.dataset.after = String(chunk.seq);
  };
  source.addEventListener("end", (event) => {
    source.close();
    const end = JSON.parse(event.data);
    if (end.cut) append(String(end.cut), true);
    if (status) {
      status.textContent = `The job ended (${String(end.state).replace(/_/g, " ")}). `;
      const reload = document.createElement("a");
      reload.href = window.location.pathname + window.location.search + "#" + (pre.closest("section") || pre).id;
      reload.textContent = "Reload the page for its result";
      reload.addEventListener("click", () => window.location.reload());
      status.appendChild(reload);
    }
  });
}

document.addEventListener("DOMContentLoaded", () => {
  if (!("EventSource" in window)) return;
  for (const pre of document.querySelectorAll("pre[data-stream]")) follow(pre);
});
