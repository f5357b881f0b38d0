# Websocket routes (live run and project groups) are added with the console's live updates.
websocket_urlpatterns = []
