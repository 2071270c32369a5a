"""Built-in plugins. Each registers through the public hooks exactly as a third-party
plugin would; the implementations they point at are imported only when used."""
