// Progressive enhancement only: every page works without this. Sorts tables marked data-sortable by a
// click on a header, and filters rows of tables with a data-filter input as you type.
"use strict";
document.documentElement.classList.add("has-js");
document.addEventListener("DOMContentLoaded", () => {
  for (const table of document.querySelectorAll("table[data-sortable]")) {
    const headers = table.tHead ? Array.from(table.tHead.rows[0].cells) : [];
    headers.forEach((th, column) => {
      th.classList.add("sortable");
      th.addEventListener("click", () => {
        const body = table.tBodies[0];
        const ascending = th.dataset.order !== "asc";
        headers.forEach((other) => delete other.dataset.order);
        th.dataset.order = ascending ? "asc" : "desc";
        const key = (row) => (row.cells[column] ? row.cells[column].dataset.sort || row.cells[column].textContent.trim() : "");
        const rows = Array.from(body.rows);
        rows.sort((a, b) => {
          const [x, y] = [key(a), key(b)];
          const [nx, ny] = [Number(x), Number(y)];
          const order = x !== "" && y !== "" && !isNaN(nx) && !isNaN(ny) ? nx - ny : x.localeCompare(y);
          return ascending ? order : -order;
        });
        rows.forEach((row) => body.appendChild(row));
      });
    });
  }
  for (const input of document.querySelectorAll("input[data-filter]")) {
    const table = document.getElementById(input.dataset.filter);
    if (!table) continue;
    input.addEventListener("input", () => {
      const needle = input.value.toLowerCase();
      for (const row of table.tBodies[0].rows) {
        row.hidden = needle !== "" && !row.textContent.toLowerCase().includes(needle);
      }
    });
  }
});
