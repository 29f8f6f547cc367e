import factory

from botapp.models import StoredFile, TelegramUser


class TelegramUserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = TelegramUser

    telegram_id = factory.Sequence(lambda n: 5000 + n)
    username = factory.Sequence(lambda n: f"user{n}")
    first_name = "Test"


class StoredFileFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = StoredFile

    source_chat_id = -1001000000001
    message_ids = factory.LazyFunction(lambda: [1])
    title = "A file"
