"""The web UI: typed function views, one module per area. Each view checks the roles matrix
through console.roles (directly or via an access function) before it reads anything."""
