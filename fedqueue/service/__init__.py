"""What the edges (the admin API, the dashboard, the CLI) ask for, over storage: the JSON shapes
they print (`admin_json`), where an activity's fan-out stands (`fanout_status`), and admin actions
that need more than one write (`webhooks`, `actors`: checks, the URL guard, secrets).

Storage keeps plain writes and reads named after their intent; the rules the actions apply live
here, once for both edges.
"""
