"""The GitHub adapter: webhooks in, the REST API out (installation tokens, contents, check runs, comments)."""
