"""Call logs (no Beam import): records that hold LLM *calls* (observability and proxy exports:
one record per call, each with the history sent so far and the call's output), read into
``Call`` / ``ToolResult`` pieces, and the pieces of one conversation assembled into it.

``calls`` is the contract (the pieces, the reader registry, detection); one module per export
family registers its reader; ``assemble`` rebuilds conversations from the pieces.
"""
