"""Backup and restore of the control plane (``racksmith backup``, ``racksmith restore``).

Owns: the archive (``archive``: what a backup holds, create, verify,
restore), its encryption (``crypto``) and the backups ``racksmith up`` takes
(``service``: the files of a backup folder, their retention, and the
snapshotter the backup controller drives). See docs/backup.md.
"""
