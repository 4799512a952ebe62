// Package browser_test holds the operator page's tests in a real browser:
// headless Chromium driven through the DevTools protocol (chromedp),
// against every store. It is a module of its own so that neither the
// page's module nor the core depends on the browser driver or the
// database drivers.
package browser_test
