from scheduler.management.jobcommand import JobCommand


class Command(JobCommand):
    job_name = "prune_handled_updates"
