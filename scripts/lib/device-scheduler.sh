# Sourced by scripts/serve-light and scripts/serve-shares (`--device-scheduler`): sets the kernel's I/O
# scheduler of the block device that holds a directory for the runs, and puts the old one back.
#   device_scheduler_set PROG DIR SCHEDULER   exits 1 when DIR is on no block device with a scheduler
#   device_scheduler_restore PROG             for the EXIT trap; does nothing when nothing was set
sched_file="" sched_old=""

device_scheduler_set() {
    local prog="$1" dir="$2" scheduler="$3" base d
    base="/sys/dev/block/$(stat -c '%Hd:%Ld' "$dir")"
    # A partition has no queue of its own: its disk (the parent directory) has.
    for d in "$base" "$base/.."; do
        if [ -f "$d/queue/scheduler" ]; then sched_file="$d/queue/scheduler"; break; fi
    done
    [ -n "$sched_file" ] || { echo "$prog: no block device scheduler for $dir" >&2; exit 1; }
    sched_old=$(grep -o '\[[^]]*\]' "$sched_file" | tr -d '[]')
    echo "$scheduler" > "$sched_file"
    echo "$prog: $sched_file: $sched_old -> $scheduler for the runs" >&2
}

device_scheduler_restore() {
    if [ -n "$sched_file" ]; then
        echo "$sched_old" > "$sched_file"
        echo "$1: $sched_file back to $sched_old" >&2
    fi
}
