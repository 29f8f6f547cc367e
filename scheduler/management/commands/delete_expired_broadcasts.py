from scheduler.management.jobcommand import JobCommand


class Command(JobCommand):
    job_name = "delete_expired_broadcasts"
