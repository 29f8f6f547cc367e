from scheduler.management.jobcommand import JobCommand


class Command(JobCommand):
    job_name = "reap_expired_claims"
