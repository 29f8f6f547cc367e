from scheduler.management.jobcommand import JobCommand


class Command(JobCommand):
    job_name = "prepare_broadcasts"
