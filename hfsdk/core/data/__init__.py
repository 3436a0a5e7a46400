"""The prompt data contract: the ``data`` section, the columns of a prompt batch, the
stream the trainer draws from, and the one tokenizer loader (loading is a plugin's)."""
