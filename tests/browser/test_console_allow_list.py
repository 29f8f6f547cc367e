"""Owner-only mode in the console: a CSV upload that names its bad row and adds nothing, then a
good one; the list says whether the mode is on; Bot settings switch it."""

from botapp.models import AllowedUser, BotSettings


def test_allowed_users_from_a_csv_and_owner_only_mode_switched_on(logged_in, tmp_path):
    page = logged_in
    page.goto("/botapp/alloweduser/")
    page.get_by_text("Owner-only mode is off (Bot settings)").wait_for()
    page.get_by_role("link", name="Upload a CSV").click()
    bad, good = tmp_path / "bad.csv", tmp_path / "good.csv"
    bad.write_text("telegram_id\n1001\nalice\n")
    good.write_text("telegram_id,name\n1001,Alice\n2002,Bob\n")
    page.get_by_label("File", exact=True).set_input_files(str(bad))
    page.get_by_role("button", name="Upload").click()
    page.get_by_text("Nothing was added. row 3: 'alice' is not a Telegram user id").wait_for()
    assert not AllowedUser.objects.exists()
    page.get_by_label("File", exact=True).set_input_files(str(good))
    page.get_by_label("Note").fill("beta testers")
    page.get_by_role("button", name="Upload").click()
    page.get_by_text("2 added to the allow-list (0 were on it already).").wait_for()
    assert sorted(AllowedUser.objects.values_list("telegram_id", "note")) == [(1001, "beta testers"), (2002, "beta testers")]

    page.goto("/botapp/botsettings/")
    page.get_by_label("Owner-only mode").check()
    page.get_by_label("Text for everyone else").fill("Invite only, {first_name}.")
    page.get_by_role("button", name="Save", exact=True).click()
    page.get_by_text("Bot settings saved").wait_for()
    conf = BotSettings.load()
    assert conf.allow_list_enabled and conf.allow_list_text == "Invite only, {first_name}."
    page.goto("/botapp/alloweduser/")
    page.get_by_text("Owner-only mode is on: the bot answers only admins and these users.").wait_for()
