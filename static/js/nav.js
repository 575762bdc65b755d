// The navigation's menu button on narrow screens: open and close the links.
document.addEventListener("DOMContentLoaded", () => {
  const button = document.querySelector(".nav-menu-button");
  if (!button) return;
  button.addEventListener("click", () => {
    const open = button.closest(".nav").classList.toggle("open");
    button.setAttribute("aria-expanded", String(open));
  });
});
